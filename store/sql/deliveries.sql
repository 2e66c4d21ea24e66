-- The named queries of store/deliveries.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- begin_delivery --
-- Claims the send of output $2 of job $1 while the job runs (or delivers) for worker $3; returns nothing if
-- the output already has a row or the job is no longer $3's (cancelled, its lease lost).
INSERT INTO courier_deliveries (job_id, output, status)
SELECT id, $2, 'sending' FROM courier_jobs WHERE id = $1 AND status IN ('running', 'delivering') AND worker = $3
ON CONFLICT DO NOTHING
RETURNING job_id;

-- park_job --
-- Job :job_id, running for :worker, waits for Telegram: it becomes 'delivering' with its files (one
-- element per file in each array, in order); returns when it began to wait. Nothing if the job is
-- no longer :worker's (cancelled, its lease lost).
WITH parked AS (
    UPDATE courier_jobs SET status = 'delivering'
    WHERE id = :job_id AND worker = :worker AND status = 'running'
    RETURNING id
), kept AS (
    INSERT INTO courier_outbox (job_id, position, output, filename, subfolder, type, via, data, parked_at)
    SELECT parked.id, f.position - 1, f.output, f.filename, f.subfolder, f.type, f.via, f.data, now()
    FROM parked, unnest(:output::text[], :filename::text[], :subfolder::text[], :type::text[], :via::text[],
                        :data::bytea[])
        WITH ORDINALITY AS f (output, filename, subfolder, type, via, data, position)
)
SELECT now() FROM parked;

-- outbox_files --
-- The files delivering job $1 waits to send, in order, and when it began to wait.
SELECT output, filename, subfolder, type, via, data, parked_at FROM courier_outbox WHERE job_id = $1 ORDER BY position;

-- get_delivery --
SELECT status, record FROM courier_deliveries WHERE job_id = $1 AND output = $2;

-- complete_delivery --
UPDATE courier_deliveries SET status = 'sent', record = $3, updated_at = now() WHERE job_id = $1 AND output = $2;

-- drop_delivery --
DELETE FROM courier_deliveries WHERE job_id = $1 AND output = $2;
