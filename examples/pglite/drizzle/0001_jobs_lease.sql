ALTER TABLE "jobs_worker" RENAME TO "jobs_lease";--> statement-breakpoint
ALTER TABLE "jobs_lease" ADD COLUMN "host" text;--> statement-breakpoint
ALTER TABLE "jobs_lease" ADD COLUMN "pid" integer;