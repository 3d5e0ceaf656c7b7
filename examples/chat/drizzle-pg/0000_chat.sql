CREATE TABLE "messages" (
	"id" serial PRIMARY KEY NOT NULL,
	"chat" text NOT NULL,
	"role" text NOT NULL,
	"text" text NOT NULL,
	"reply_to" integer,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jobs_job" (
	"seq" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "jobs_job_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"queue" text NOT NULL,
	"id" text DEFAULT gen_random_uuid()::text NOT NULL,
	"grp" text,
	"value" jsonb DEFAULT 'null'::jsonb NOT NULL,
	"state" text DEFAULT 'waiting' NOT NULL,
	"priority" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"max_attempts" integer DEFAULT 10 NOT NULL,
	"run_at" timestamp with time zone DEFAULT now() NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	"error" text,
	"result" jsonb,
	"error_stack" text,
	"abandoned" boolean DEFAULT false NOT NULL,
	CONSTRAINT "jobs_job_state_check" CHECK (state in ('waiting', 'scheduled', 'running', 'done', 'failed', 'canceled'))
);
--> statement-breakpoint
CREATE TABLE "jobs_lease" (
	"job" bigint PRIMARY KEY NOT NULL,
	"queue" text NOT NULL,
	"grp" text,
	"owner" text NOT NULL,
	"attempt" integer NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"channel" text
);
--> statement-breakpoint
CREATE TABLE "jobs_queue" (
	"name" text PRIMARY KEY NOT NULL,
	"paused" boolean DEFAULT false NOT NULL,
	"concurrency" integer,
	"concurrency_per_group" integer,
	"limits_set_at" timestamp with time zone,
	"waiting" bigint DEFAULT 0 NOT NULL,
	"scheduled" bigint DEFAULT 0 NOT NULL,
	"running" bigint DEFAULT 0 NOT NULL,
	"done" bigint DEFAULT 0 NOT NULL,
	"failed" bigint DEFAULT 0 NOT NULL,
	"canceled" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jobs_step" (
	"job" bigint NOT NULL,
	"name" text NOT NULL,
	"answer" jsonb,
	CONSTRAINT "jobs_step_job_name_pk" PRIMARY KEY("job","name")
);
--> statement-breakpoint
ALTER TABLE "messages" ADD CONSTRAINT "messages_reply_to_messages_id_fk" FOREIGN KEY ("reply_to") REFERENCES "public"."messages"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "jobs_lease" ADD CONSTRAINT "jobs_lease_job_jobs_job_seq_fk" FOREIGN KEY ("job") REFERENCES "public"."jobs_job"("seq") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "jobs_step" ADD CONSTRAINT "jobs_step_job_jobs_job_seq_fk" FOREIGN KEY ("job") REFERENCES "public"."jobs_job"("seq") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "messages_reply_to" ON "messages" USING btree ("reply_to");--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_job_queue_id" ON "jobs_job" USING btree ("queue","id");--> statement-breakpoint
CREATE INDEX "jobs_job_claim" ON "jobs_job" USING btree ("queue","priority","run_at","seq") WHERE state in ('waiting', 'scheduled');--> statement-breakpoint
CREATE INDEX "jobs_job_scheduled" ON "jobs_job" USING btree ("queue","run_at") WHERE state = 'scheduled';--> statement-breakpoint
CREATE INDEX "jobs_job_abandoned" ON "jobs_job" USING btree ("queue","priority","run_at","seq") WHERE abandoned and state in ('waiting', 'scheduled');--> statement-breakpoint
CREATE INDEX "jobs_job_ended" ON "jobs_job" USING btree ("queue","state","finished_at") WHERE state in ('done', 'failed', 'canceled');