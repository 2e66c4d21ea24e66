-- A job whose results Telegram would not take (an outage: 5xx, 429, no connection) waits as
-- 'delivering' instead of failing: rendered, its backend free, its files kept in courier_outbox,
-- and its lease renewed by the host that tries them again. If that host dies, another one takes
-- the job over once the lease ran out (claim_delivery) and sends what is left, from the rows here:
-- it is never rendered again (requeue_expired moves only 'running' jobs).
ALTER TABLE courier_jobs DROP CONSTRAINT courier_jobs_status_check;
ALTER TABLE courier_jobs ADD CONSTRAINT courier_jobs_status_check
    CHECK (status IN ('queued', 'running', 'delivering', 'succeeded', 'failed', 'cancelled'));
CREATE INDEX courier_jobs_delivering_idx ON courier_jobs (lease_until) WHERE status = 'delivering';

CREATE TABLE courier_outbox (
    job_id bigint NOT NULL REFERENCES courier_jobs ON DELETE CASCADE,
    position integer NOT NULL,  -- the file's place among the job's results
    output text NOT NULL,  -- "<node id>:<index>", as in courier_deliveries
    filename text NOT NULL,
    subfolder text NOT NULL,
    type text NOT NULL,
    via text NOT NULL,
    data bytea NOT NULL,
    parked_at timestamptz NOT NULL DEFAULT now(),  -- when the job began to wait: its patience counts from here
    PRIMARY KEY (job_id, position)
);
