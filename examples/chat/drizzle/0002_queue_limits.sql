ALTER TABLE `jobs_queue` ADD `concurrency` integer;--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `concurrency_per_group` integer;--> statement-breakpoint
ALTER TABLE `jobs_queue` ADD `limits_set_at` integer;