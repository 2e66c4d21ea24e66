-- When queued jobs start, from each command's own recent run times (issue 31): one function that
-- the chat's queue message (hold_queue_message) and the panel's queue (list_queue) both read.
CREATE INDEX courier_jobs_command_succeeded_idx ON courier_jobs (command, finished_at) WHERE status = 'succeeded';

-- Per job of p_jobs (queued ones; others are left out): its place in the claim order (1 = claimed
-- next; courier_queue's position) and in how many seconds it starts (NULL: no estimate yet).
--
-- A command's run time is the median of its last 50 succeeded runs, its own: a /demo is not told
-- an /img's. A run is what it held its backend: ComfyUI's execution time where the result has it
-- (its delivery, which may wait on Telegram's limits for seconds, does not hold the backend), else
-- claim to end. A job starts at once if a slot is free for it (the running jobs and
-- the jobs ahead of it fill fewer slots than the healthy backends taking jobs have); else once the
-- work before it is done, spread over the slots: the running jobs' time left (their median less
-- what they ran) and the run times of the queued jobs ahead of it. No estimate when its command,
-- or a job before it, has no succeeded run yet, or while no backend takes jobs.
--
-- The jobs ahead of a job are those of hold_queue_message's places: job k of a user comes after
-- up to k-1 jobs of every user, plus one more of each user whose turn comes first and who has k or
-- more. Their run times are summed per user as a running sum over that user's queued jobs, so each
-- (user, k) costs one row per user, as the places do.
CREATE FUNCTION courier_queue_estimates_v1(p_jobs bigint[])
RETURNS TABLE (job_id bigint, place bigint, starts_in_s double precision)
LANGUAGE sql STABLE AS $$
WITH active AS (
    SELECT id, user_id, command, status, started_at FROM courier_jobs WHERE status IN ('queued', 'running')
), medians AS (
    SELECT c.command,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY recent.seconds)
            FROM (SELECT coalesce((j.result->>'execution_ms')::float / 1000,
                                  extract(epoch FROM j.finished_at - j.started_at)) AS seconds
                  FROM courier_jobs j
                  WHERE j.status = 'succeeded' AND j.command = c.command AND j.started_at IS NOT NULL
                  ORDER BY j.finished_at DESC
                  LIMIT 50) recent) AS median_s
    FROM (SELECT DISTINCT command FROM active) c
), queued AS (
    SELECT a.id, a.user_id, a.command, m.median_s,
           row_number() OVER mine AS k,
           coalesce(sum(m.median_s) OVER mine, 0) AS work,
           count(*) FILTER (WHERE m.median_s IS NULL) OVER mine AS unknown
    FROM active a
    JOIN medians m ON m.command = a.command
    WHERE a.status = 'queued'
    WINDOW mine AS (PARTITION BY a.user_id ORDER BY a.id ROWS UNBOUNDED PRECEDING)
), turns AS (
    SELECT c.user_id, c.n, row_number() OVER (ORDER BY u.last_served_at ASC NULLS FIRST, c.first_id) AS turn
    FROM (SELECT user_id, count(*) AS n, min(id) AS first_id FROM queued GROUP BY user_id) c
    JOIN courier_users u ON u.user_id = c.user_id
), running AS (
    SELECT count(*) AS jobs,
           coalesce(sum(greatest(m.median_s - extract(epoch FROM now() - a.started_at), 0)), 0) AS work,
           count(*) FILTER (WHERE m.median_s IS NULL) AS unknown
    FROM active a
    JOIN medians m ON m.command = a.command
    WHERE a.status = 'running'
), slots AS (
    SELECT coalesce(sum(capacity), 0) AS n FROM courier_backends WHERE healthy AND NOT draining
), wanted AS (
    SELECT * FROM queued WHERE id = ANY(p_jobs)
), ahead AS (
    SELECT ranks.user_id, ranks.k, sum(taken.n) AS jobs, coalesce(sum(b.work), 0) AS work,
           coalesce(sum(b.unknown), 0) AS unknown
    FROM (SELECT DISTINCT user_id, k FROM wanted) ranks
    JOIN turns me ON me.user_id = ranks.user_id
    CROSS JOIN turns o
    CROSS JOIN LATERAL (SELECT least(o.n, ranks.k - 1) + (o.turn < me.turn AND o.n >= ranks.k)::int AS n) taken
    LEFT JOIN queued b ON b.user_id = o.user_id AND b.k = taken.n
    GROUP BY ranks.user_id, ranks.k
)
SELECT w.id, 1 + a.jobs,
       CASE WHEN w.median_s IS NULL OR s.n = 0 THEN NULL
            WHEN r.jobs + a.jobs < s.n THEN 0
            WHEN r.unknown + a.unknown > 0 THEN NULL
            ELSE (r.work + a.work) / s.n END
FROM wanted w
JOIN ahead a ON a.user_id = w.user_id AND a.k = w.k
CROSS JOIN running r
CROSS JOIN slots s
$$;
