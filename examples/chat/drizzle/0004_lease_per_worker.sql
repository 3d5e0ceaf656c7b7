CREATE TABLE `jobs_worker` (
	`owner` text PRIMARY KEY NOT NULL,
	`expires_at` integer NOT NULL,
	`channel` text
);
--> statement-breakpoint
DROP TABLE `jobs_lease`;--> statement-breakpoint
ALTER TABLE `jobs_job` ADD `owner` text;--> statement-breakpoint
CREATE INDEX `jobs_job_running` ON `jobs_job` (`queue`,`owner`) WHERE state = 'running';