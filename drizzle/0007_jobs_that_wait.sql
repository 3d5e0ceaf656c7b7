CREATE TABLE `jobs_event` (
	`job` integer NOT NULL,
	`name` text NOT NULL,
	`state` text DEFAULT 'sent' NOT NULL,
	`payload` text,
	`deadline` integer,
	`at` integer DEFAULT (cast((julianday('now') - 2440587.5) * 86400000 as integer)) NOT NULL,
	PRIMARY KEY(`job`, `name`),
	FOREIGN KEY (`job`) REFERENCES `jobs_job`(`seq`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `jobs_job` ADD `waits_for` text;--> statement-breakpoint
ALTER TABLE `jobs_job` ADD `signals` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `jobs_job` ADD `unique_key` text;--> statement-breakpoint
ALTER TABLE `jobs_job` ADD `unique_states` text;--> statement-breakpoint
ALTER TABLE `jobs_job` ADD `debounce_key` text;--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_job_unique` ON `jobs_job` (`queue`,`unique_key`) WHERE unique_key is not null and instr(unique_states, ',' || state || ',') > 0;--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_job_debounce` ON `jobs_job` (`queue`,`debounce_key`) WHERE debounce_key is not null and state in ('waiting', 'scheduled');