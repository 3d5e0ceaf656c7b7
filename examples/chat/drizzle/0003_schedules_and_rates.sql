CREATE TABLE `jobs_schedule` (
	`queue` text NOT NULL,
	`name` text NOT NULL,
	`cron` text NOT NULL,
	`tz` text DEFAULT 'UTC' NOT NULL,
	`value` text DEFAULT 'null' NOT NULL,
	`backfill` integer,
	`next_at` integer NOT NULL,
	`last_slot` integer,
	`updated_at` integer DEFAULT (cast((julianday('now') - 2440587.5) * 86400000 as integer)) NOT NULL,
	PRIMARY KEY(`queue`, `name`)
);
--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `rate_limit` integer;--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `rate_per` integer;--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `rate_per_group` integer;--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `rate_starts` text;--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `claim_waiters` text;