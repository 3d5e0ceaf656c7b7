CREATE TABLE "jobs_event" (
	"job" bigint NOT NULL,
	"name" text NOT NULL,
	"state" text DEFAULT 'sent' NOT NULL,
	"payload" jsonb,
	"deadline" timestamp with time zone,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "jobs_event_job_name_pk" PRIMARY KEY("job","name"),
	CONSTRAINT "jobs_event_state_check" CHECK (state in ('waiting', 'sent', 'timed_out'))
);
--> statement-breakpoint
ALTER TABLE "jobs_job" ADD COLUMN "waits_for" text;--> statement-breakpoint
ALTER TABLE "jobs_job" ADD COLUMN "signals" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "jobs_job" ADD COLUMN "unique_key" text;--> statement-breakpoint
ALTER TABLE "jobs_job" ADD COLUMN "unique_states" text;--> statement-breakpoint
ALTER TABLE "jobs_job" ADD COLUMN "debounce_key" text;--> statement-breakpoint
ALTER TABLE "jobs_event" ADD CONSTRAINT "jobs_event_job_jobs_job_seq_fk" FOREIGN KEY ("job") REFERENCES "public"."jobs_job"("seq") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_job_unique" ON "jobs_job" USING btree ("queue","unique_key") WHERE unique_key is not null and strpos(unique_states, ',' || state || ',') > 0;--> statement-breakpoint
CREATE UNIQUE INDEX "jobs_job_debounce" ON "jobs_job" USING btree ("queue","debounce_key") WHERE debounce_key is not null and state in ('waiting', 'scheduled');