CREATE TABLE "jobs_count" (
	"queue" text NOT NULL,
	"waiting" bigint DEFAULT 0 NOT NULL,
	"scheduled" bigint DEFAULT 0 NOT NULL,
	"running" bigint DEFAULT 0 NOT NULL,
	"done" bigint DEFAULT 0 NOT NULL,
	"failed" bigint DEFAULT 0 NOT NULL,
	"canceled" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jobs_schedule" (
	"queue" text NOT NULL,
	"name" text NOT NULL,
	"cron" text NOT NULL,
	"tz" text DEFAULT 'UTC' NOT NULL,
	"value" jsonb DEFAULT 'null'::jsonb NOT NULL,
	"backfill" bigint,
	"next_at" timestamp with time zone NOT NULL,
	"last_slot" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "jobs_schedule_queue_name_pk" PRIMARY KEY("queue","name")
);
--> statement-breakpoint
ALTER TABLE "jobs_job" ALTER COLUMN "priority" SET DATA TYPE bigint;--> statement-breakpoint
ALTER TABLE "jobs_queue" ADD COLUMN "rate_limit" integer;--> statement-breakpoint
ALTER TABLE "jobs_queue" ADD COLUMN "rate_per" bigint;--> statement-breakpoint
ALTER TABLE "jobs_queue" ADD COLUMN "rate_per_group" integer;--> statement-breakpoint
ALTER TABLE "jobs_queue" ADD COLUMN "rate_starts" jsonb;--> statement-breakpoint
ALTER TABLE "jobs_queue" ADD COLUMN "claim_waiters" jsonb;--> statement-breakpoint
ALTER TABLE "jobs_step" ADD COLUMN "seq" bigint NOT NULL GENERATED ALWAYS AS IDENTITY (sequence name "jobs_step_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1);--> statement-breakpoint
CREATE INDEX "jobs_count_queue" ON "jobs_count" USING btree ("queue");