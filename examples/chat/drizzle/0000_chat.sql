CREATE TABLE `messages` (
	`id` integer PRIMARY KEY NOT NULL,
	`chat` text NOT NULL,
	`role` text NOT NULL,
	`text` text NOT NULL,
	`reply_to` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`reply_to`) REFERENCES `messages`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `messages_reply_to` ON `messages` (`reply_to`);--> statement-breakpoint
CREATE TABLE `jobs_job` (
	`seq` integer PRIMARY KEY NOT NULL,
	`queue` text NOT NULL,
	`id` text DEFAULT (lower(hex(randomblob(16)))) NOT NULL,
	`grp` text,
	`value` text DEFAULT 'null' NOT NULL,
	`state` text DEFAULT 'waiting' NOT NULL,
	`priority` integer DEFAULT 0 NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`max_attempts` integer DEFAULT 10 NOT NULL,
	`run_at` integer DEFAULT (cast((julianday('now') - 2440587.5) * 86400000 as integer)) NOT NULL,
	`created_at` integer DEFAULT (cast((julianday('now') - 2440587.5) * 86400000 as integer)) NOT NULL,
	`finished_at` integer,
	`error` text,
	`result` text,
	`error_stack` text,
	`abandoned` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_job_queue_id` ON `jobs_job` (`queue`,`id`);--> statement-breakpoint
CREATE INDEX `jobs_job_claim` ON `jobs_job` (`queue`,`priority`,`run_at`,`seq`) WHERE state in ('waiting', 'scheduled');--> statement-breakpoint
CREATE INDEX `jobs_job_scheduled` ON `jobs_job` (`queue`,`run_at`) WHERE state = 'scheduled';--> statement-breakpoint
CREATE INDEX `jobs_job_abandoned` ON `jobs_job` (`queue`,`priority`,`run_at`,`seq`) WHERE abandoned = 1 and state in ('waiting', 'scheduled');--> statement-breakpoint
CREATE INDEX `jobs_job_ended` ON `jobs_job` (`queue`,`state`,`finished_at`) WHERE state in ('done', 'failed', 'canceled');--> statement-breakpoint
CREATE TABLE `jobs_lease` (
	`job` integer PRIMARY KEY NOT NULL,
	`queue` text NOT NULL,
	`grp` text,
	`owner` text NOT NULL,
	`attempt` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`channel` text,
	FOREIGN KEY (`job`) REFERENCES `jobs_job`(`seq`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `jobs_queue` (
	`name` text PRIMARY KEY NOT NULL,
	`paused` integer DEFAULT 0 NOT NULL,
	`waiting` integer DEFAULT 0 NOT NULL,
	`scheduled` integer DEFAULT 0 NOT NULL,
	`running` integer DEFAULT 0 NOT NULL,
	`done` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`canceled` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE `jobs_step` (
	`job` integer NOT NULL,
	`name` text NOT NULL,
	`answer` text,
	PRIMARY KEY(`job`, `name`),
	FOREIGN KEY (`job`) REFERENCES `jobs_job`(`seq`) ON UPDATE no action ON DELETE cascade
);
