CREATE TABLE "jobs_worker" (
	"owner" text PRIMARY KEY NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"channel" text
);
--> statement-breakpoint
ALTER TABLE "jobs_lease" DISABLE ROW LEVEL SECURITY;--> statement-breakpoint
DROP TABLE "jobs_lease" CASCADE;--> statement-breakpoint
ALTER TABLE "jobs_job" ADD COLUMN "owner" text;--> statement-breakpoint
CREATE INDEX "jobs_job_running" ON "jobs_job" USING btree ("queue","owner") WHERE state = 'running';