-- When the run under a job's lease ended, so other jobs can wait for it (the daily root
-- waits for the day's vendor refresh). NULL while it runs.
ALTER TABLE job_leases ADD COLUMN finished_at TIMESTAMPTZ;
