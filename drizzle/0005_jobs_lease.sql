ALTER TABLE `jobs_worker` RENAME TO `jobs_lease`;--> statement-breakpoint
ALTER TABLE `jobs_lease` ADD `host` text;--> statement-breakpoint
ALTER TABLE `jobs_lease` ADD `pid` integer;