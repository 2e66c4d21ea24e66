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
-- more. Their run times are summed per user as a running sum over that user's queued jobs (an
-- array per user, read at the rank taken), so each (user, k) costs one row per user, as the
-- places do, and no join.
CREATE FUNCTION courier_queue_estimates_v1(p_jobs bigint[])
RETURNS TABLE (job_id bigint, place bigint, starts_in_s double precision)
LANGUAGE sql STABLE AS $$
WITH running AS MATERIALIZED (
    SELECT command, started_at FROM courier_jobs WHERE status = 'running'
), medians AS MATERIALIZED (
    SELECT c.command,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY recent.seconds)
            FROM (SELECT coalesce((j.result->>'execution_ms')::float / 1000,
                                  extract(epoch FROM j.finished_at - j.started_at)) AS seconds
                  FROM courier_jobs j
                  WHERE j.status = 'succeeded' AND j.command = c.command AND j.started_at IS NOT NULL
                  ORDER BY j.finished_at DESC
                  LIMIT 50) recent) AS median_s
    FROM (SELECT DISTINCT command FROM courier_jobs WHERE status IN ('queued', 'running')) c
), ranked AS MATERIALIZED (
    SELECT q.id, q.user_id, q.median_s,
           row_number() OVER mine AS k,
           sum(coalesce(q.median_s, 'Infinity')) OVER mine AS work  -- no known run time: forever
    FROM (SELECT j.id, j.user_id, (SELECT m.median_s FROM medians m WHERE m.command = j.command) AS median_s
          FROM courier_jobs j
          WHERE j.status = 'queued'
          ORDER BY j.user_id, j.id) q
    WINDOW mine AS (PARTITION BY q.user_id ORDER BY q.id ROWS UNBOUNDED PRECEDING)
), turns AS MATERIALIZED (
    -- per user: queued jobs, turn, and the work of their first k jobs at [k]
    SELECT r.user_id, count(*) AS n, array_agg(r.work ORDER BY r.k) AS work,
           row_number() OVER (ORDER BY u.last_served_at ASC NULLS FIRST, min(r.id)) AS turn
    FROM ranked r
    JOIN courier_users u ON u.user_id = r.user_id
    GROUP BY r.user_id, u.last_served_at
), busy AS MATERIALIZED (
    SELECT count(*) AS jobs,
           coalesce(sum(greatest(coalesce(m.median_s, 'Infinity') - extract(epoch FROM now() - r.started_at), 0)),
                    0) AS work
    FROM running r
    JOIN medians m ON m.command = r.command
), slots AS MATERIALIZED (
    SELECT coalesce(sum(capacity), 0) AS n FROM courier_backends WHERE healthy AND NOT draining
), wanted AS (
    SELECT * FROM ranked WHERE id = ANY(p_jobs)
), ahead AS (
    SELECT ranks.user_id, ranks.k, sum(taken.n) AS jobs, coalesce(sum(o.work[taken.n]), 0) AS work
    FROM (SELECT DISTINCT user_id, k FROM wanted) ranks
    JOIN turns me ON me.user_id = ranks.user_id
    CROSS JOIN turns o
    CROSS JOIN LATERAL (SELECT least(o.n, ranks.k - 1) + (o.turn < me.turn AND o.n >= ranks.k)::int AS n) taken
    GROUP BY ranks.user_id, ranks.k
)
SELECT w.id, 1 + a.jobs,
       CASE WHEN w.median_s IS NULL OR s.n = 0 THEN NULL
            WHEN r.jobs + a.jobs < s.n THEN 0
            WHEN r.work + a.work = 'Infinity' THEN NULL
            ELSE (r.work + a.work) / s.n END
FROM wanted w
JOIN ahead a ON a.user_id = w.user_id AND a.k = w.k
CROSS JOIN busy r
CROSS JOIN slots s
$$;
