CREATE TABLE "messages" (
	"id" serial PRIMARY KEY NOT NULL,
	"text" text NOT NULL
);
--> statement-breakpoint
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
CREATE TABLE "jobs_job" (
	"seq" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "jobs_job_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"queue" text NOT NULL,
	"id" text DEFAULT gen_random_uuid()::text NOT NULL,
	"grp" text,
	"value" jsonb DEFAULT 'null'::jsonb NOT NULL,
	"state" text DEFAULT 'waiting' NOT NULL,
	"priority" bigint DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 10 NOT NULL,
	"run_at" timestamp with time zone DEFAULT now() NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	"error" text,
	"result" jsonb,
	"error_stack" text,
	"owner" text,
	"abandoned" boolean DEFAULT false NOT NULL,
	CONSTRAINT "jobs_job_state_check" CHECK (state in ('waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'))
);
--> statement-breakpoint
CREATE TABLE "jobs_queue" (
	"name" text PRIMARY KEY NOT NULL,
	"paused" boolean DEFAULT false NOT NULL,
	"concurrency" integer,
	"concurrency_per_group" integer,
	"limits_set_at" timestamp with time zone,
	"rate_limit" integer,
	"rate_per" bigint,
	"rate_per_group" integer,
	"rate_starts" jsonb,
	"claim_waiters" jsonb,
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
CREATE TABLE "jobs_step" (
	"job" bigint NOT NULL,
	"name" text NOT NULL,
	"answer" jsonb,
	"seq" bigint GENERATED ALWAYS AS IDENTITY (sequence name "jobs_step_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	CONSTRAINT "jobs_step_job_name_pk" PRIMARY KEY("job","name")
);
--> statement-breakpoint
CREATE TABLE "jobs_worker" (
	"owner" text PRIMARY KEY NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"channel" text
);
--> statement-breakpoint
ALTER TABLE "jobs_step" ADD CONSTRAINT "jobs_step_job_jobs_job_seq_fk" FOREIGN KEY ("job") REFERENCES "public"."jobs_job"("seq") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "jobs_count_queue" ON "jobs_count" USING btree ("queue");--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_job_queue_id" ON "jobs_job" USING btree ("queue","id");--> statement-breakpoint
CREATE INDEX "jobs_job_claim" ON "jobs_job" USING btree ("queue","priority","run_at","seq") WHERE state in ('waiting', 'scheduled');--> statement-breakpoint
CREATE INDEX "jobs_job_scheduled" ON "jobs_job" USING btree ("queue","run_at") WHERE state = 'scheduled';--> statement-breakpoint
CREATE INDEX "jobs_job_abandoned" ON "jobs_job" USING btree ("queue","priority","run_at","seq") WHERE abandoned and state in ('waiting', 'scheduled');--> statement-breakpoint
CREATE INDEX "jobs_job_ended" ON "jobs_job" USING btree ("queue","state","finished_at") WHERE state in ('done', 'failed', 'canceled');--> statement-breakpoint
CREATE INDEX "jobs_job_running" ON "jobs_job" USING btree ("queue","owner") WHERE state = 'running';