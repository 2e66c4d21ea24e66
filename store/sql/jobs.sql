-- The named queries of store/jobs.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- submit_jobs --
-- Queue jobs in one statement and one transaction, in the order given (courier_submit_v1 each; its
-- later calls see what the earlier ones wrote): each array holds one element per job, in the
-- function's order of arguments, :params each job's params as JSON text. One row per job, in order.
SELECT s.job_id, s.active, s.spent, s.duplicate
FROM unnest(:user_id::bigint[], :username::text[], :first_name::text[], :language_code::text[], :chat_id::bigint[],
            :command::text[], :params::text[], :max_attempts::integer[], :reply_to_message_id::bigint[],
            :max_active::bigint[], :per_hour::integer[], :per_day::integer[], :bot_id::bigint[],
            :update_id::bigint[], :part::integer[])
     WITH ORDINALITY AS r(user_id, username, first_name, language_code, chat_id, command, params, max_attempts,
                          reply_to_message_id, max_active, per_hour, per_day, bot_id, update_id, part, n)
CROSS JOIN LATERAL courier_submit_v1(r.user_id, r.username, r.first_name, r.language_code, r.chat_id, r.command,
                                     r.params::jsonb, r.max_attempts, r.reply_to_message_id, r.max_active,
                                     r.per_hour, r.per_day, r.bot_id, r.update_id, r.part) AS s
ORDER BY r.n;

-- notify_jobs --
-- Wakes the dispatchers LISTENing on courier_jobs once the transaction commits.
SELECT pg_notify('courier_jobs', $1);

-- queue_position --
-- courier_queue's position for the one job $1 (NULL unless queued), without computing every
-- job's: one pass over the queued jobs per user, not one per job and user.
WITH mine AS MATERIALIZED (
    SELECT j.user_id,
           (SELECT count(*) FROM courier_jobs q
            WHERE q.user_id = j.user_id AND q.status = 'queued' AND q.id <= j.id) AS k
    FROM courier_jobs j
    WHERE j.id = $1 AND j.status = 'queued'
), turns AS (
    SELECT q.user_id, count(*) AS n,
           row_number() OVER (ORDER BY u.last_served_at ASC NULLS FIRST, min(q.id)) AS turn
    FROM courier_jobs q
    JOIN courier_users u ON u.user_id = q.user_id
    WHERE q.status = 'queued'
    GROUP BY q.user_id, u.last_served_at
)
SELECT 1 + sum(least(o.n, mine.k - 1) + (o.turn < me.turn AND o.n >= mine.k)::int)::bigint
FROM mine
JOIN turns me ON me.user_id = mine.user_id
CROSS JOIN turns o;

-- claim_job --
-- Gives the next job to worker $1 for $2 seconds, on backend $3: the oldest queued job of the
-- user served least recently (never served first). Rows locked by a concurrent claim are skipped.
-- Nothing while the backend is unhealthy or draining. A job naming a
-- model file that another backend taking jobs has and $3 lacks is left for that one (a backend
-- counts while some host checks it: every few seconds, so within the last minute). A job whose
-- params name a backend (/bench @backend) goes to that one only. $3 NULL: any job, no backend rules.
-- Warm placement unless $4 is NULL: a job's files are its graph's string inputs that $3 lists as
-- model files, and the backend holds (`warm`) those of the last job claimed on it. A job whose
-- files it holds counts as if its user had been served $4 seconds earlier: the backend takes a
-- warm job of a user served up to $4 s more recently before a cold one (a user's own warm jobs
-- first), never before a user never served. A job whose files another backend taking jobs holds,
-- and $3 does not, is left for that one while it has been queued under $4 seconds. So users still
-- take turns, each held back $4 s at most.
WITH backend AS (
    SELECT b.models, b.warm
    FROM courier_backends b
    WHERE b.url = $3 AND b.healthy AND NOT b.draining
    UNION ALL
    SELECT NULL, NULL WHERE $3::text IS NULL
), candidate AS (
    SELECT j.id, j.created_at, u.last_served_at, f.files,
           $4::float8 IS NOT NULL AND f.files <> '[]' AND b.warm @> f.files AS warm_here
    FROM courier_jobs j
    JOIN courier_users u ON u.user_id = j.user_id
    CROSS JOIN backend b
    CROSS JOIN LATERAL (
        SELECT coalesce(jsonb_agg(DISTINCT input.value), '[]') AS files
        FROM jsonb_path_query(j.params, '$.workflow.*.inputs.* ? (@.type() == "string")') AS input(value)
        WHERE b.models @> input.value
    ) f
    WHERE j.status = 'queued' AND (j.params->>'backend' IS NULL OR j.params->>'backend' = $3 OR $3::text IS NULL)
        AND (b.models IS NULL OR NOT EXISTS (
        SELECT 1
        FROM jsonb_path_query(j.params, '$.workflow.*.inputs.* ? (@.type() == "string")') AS input(value)
        WHERE NOT b.models @> input.value AND EXISTS (
            SELECT 1 FROM courier_backends o
            WHERE o.healthy AND NOT o.draining AND o.checked_at > now() - interval '1 minute'
                AND o.models @> input.value)))
), next AS (
    SELECT j.id, c.files
    FROM candidate c
    JOIN courier_jobs j ON j.id = c.id
    WHERE j.status = 'queued'  -- checked again on the row it locks: a claim that committed meanwhile took it
        AND (c.warm_here OR $4::float8 IS NULL OR c.files = '[]' OR c.created_at <= now() - make_interval(secs => $4)
        OR NOT EXISTS (
            SELECT 1 FROM courier_backends o
            WHERE o.url <> $3 AND o.healthy AND NOT o.draining AND o.checked_at > now() - interval '1 minute'
                AND o.warm @> c.files))
    ORDER BY coalesce(c.last_served_at, '-infinity')
                 + make_interval(secs => CASE WHEN c.warm_here THEN 0 ELSE coalesce($4, 0) END), j.id
    LIMIT 1
    FOR UPDATE OF j SKIP LOCKED
), claimed AS (
    UPDATE courier_jobs j
    SET status = 'running',
        worker = $1,
        backend = $3,
        attempts = j.attempts + 1,
        lease_until = now() + make_interval(secs => $2),
        started_at = now()
    FROM next
    WHERE j.id = next.id
    RETURNING j.*
), served AS (
    UPDATE courier_users u
    SET last_served_at = now()
    FROM claimed
    WHERE u.user_id = claimed.user_id
), placed AS (
    UPDATE courier_backends b
    SET warm = next.files
    FROM next
    WHERE b.url = $3  -- none for a job of no model file: ComfyUI keeps only the last graph's outputs
)
SELECT * FROM claimed;

-- warm_hold_ends_in --
-- Seconds until the first queued job that a claim with warm wait $1 may have left for another
-- backend (queued under $1 s ago) is free for any backend; NULL: no such job. An idle backend
-- looks again then (a job not held at all only makes it look once more).
SELECT extract(epoch FROM min(created_at) + make_interval(secs => $1) - now())::float8
FROM courier_jobs
WHERE status = 'queued' AND created_at > now() - make_interval(secs => $1);

-- extend_lease --
UPDATE courier_jobs
SET lease_until = now() + make_interval(secs => $3)
WHERE id = $1 AND worker = $2 AND status IN ('running', 'delivering')
RETURNING id;

-- set_progress --
UPDATE courier_jobs SET progress = $2 WHERE id = $1 AND status = 'running' RETURNING id;

-- adopt_status_message --
-- Makes message $2 the status message of job $1 unless it has one already (the bot's "Queued"
-- reply and the dispatcher's first progress message race for it); returns the one that is, and
-- whether the job's chat has a queue message now (one may have been posted for the job while its
-- status was on its way: a round that read the queue before the job was claimed). A job still
-- queued wakes the dispatchers again: a claim while this held its row skipped it (SKIP LOCKED), and
-- would otherwise wait for the next job or the idle poll.
WITH adopted AS (
    UPDATE courier_jobs SET status_message_id = COALESCE(status_message_id, $2) WHERE id = $1
    RETURNING chat_id, status, status_message_id
)
SELECT adopted.status_message_id,
       EXISTS (SELECT 1 FROM courier_queue_messages m WHERE m.chat_id = adopted.chat_id) AS queue_message
FROM adopted
LEFT JOIN LATERAL (SELECT pg_notify('courier_jobs', $1::text) WHERE adopted.status = 'queued') AS woken ON true;

-- move_status_message --
-- The status message of job $1 is now message $2 (a live preview turned it into a photo, or the
-- final text replaced that photo), so that /forget deletes the one the chat shows.
UPDATE courier_jobs SET status_message_id = $2 WHERE id = $1;

-- take_status_message --
-- Where worker $2 shows the status of job $1 (courier_take_status_v1): decision, message.
SELECT decision, message FROM courier_take_status_v1($1, $2);

-- finish_job --
-- Ends a running (or delivering) job as $2 (succeeded or failed); only worker $5 may, unless $5
-- is NULL. The files it kept for Telegram go with it.
WITH finished AS (
    UPDATE courier_jobs
    SET status = $2, result = $3, error = $4, finished_at = now(), lease_until = NULL
    WHERE id = $1 AND status IN ('running', 'delivering') AND ($5::text IS NULL OR worker = $5)
    RETURNING id
), kept AS (
    DELETE FROM courier_outbox o USING finished WHERE o.job_id = finished.id
)
SELECT id FROM finished;

-- release_job --
-- Gives a running job of worker $2 back to the queue with reason $3. Unless $4 (its backend
-- failed it), the attempt does not count (say this dispatcher is stopping).
UPDATE courier_jobs
SET status = 'queued', attempts = CASE WHEN $4 THEN attempts ELSE greatest(attempts - 1, 0) END,
    worker = NULL, lease_until = NULL, started_at = NULL, progress = NULL, error = $3
WHERE id = $1 AND status = 'running' AND worker = $2
RETURNING id;

-- cancel_job --
UPDATE courier_jobs
SET status = 'cancelled', error = $2, finished_at = now(), lease_until = NULL
WHERE id = $1 AND status IN ('queued', 'running')
RETURNING id;

-- withdraw_job --
-- Cancels a job that has not started yet.
UPDATE courier_jobs
SET status = 'cancelled', error = $2, finished_at = now()
WHERE id = $1 AND status = 'queued'
RETURNING id;

-- cancel_user_jobs --
-- Cancels the user's queued and running jobs; returns them with the status they had.
WITH target AS (
    SELECT id, status
    FROM courier_jobs
    WHERE user_id = $1 AND status IN ('queued', 'running')
    FOR UPDATE
)
UPDATE courier_jobs j
SET status = 'cancelled', finished_at = now(), lease_until = NULL
FROM target
WHERE j.id = target.id
RETURNING j.*, target.status AS previous_status;

-- requeue_expired --
-- Running jobs whose lease has expired go back to the queue, or fail once out of attempts.
WITH expired AS (
    SELECT id
    FROM courier_jobs
    WHERE status = 'running' AND lease_until < now()
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_jobs j
SET status = CASE WHEN j.attempts < j.max_attempts THEN 'queued' ELSE 'failed' END,
    error = CASE WHEN j.attempts < j.max_attempts THEN j.error ELSE 'lease expired' END,
    finished_at = CASE WHEN j.attempts < j.max_attempts THEN NULL ELSE now() END,
    worker = NULL,
    lease_until = NULL
FROM expired
WHERE j.id = expired.id
RETURNING j.*;

-- list_queue --
-- Running jobs (oldest first), then queued jobs in claim order, with when they start (as the chat's
-- queue message says: courier_queue_estimates_v1); only user $1's unless NULL.
SELECT j.*, e.place AS position, e.starts_in_s
FROM courier_jobs j
LEFT JOIN courier_queue_estimates_v1(ARRAY(
    SELECT id FROM courier_jobs WHERE status = 'queued' AND ($1::bigint IS NULL OR user_id = $1))) e ON e.job_id = j.id
WHERE j.status IN ('running', 'queued') AND ($1::bigint IS NULL OR j.user_id = $1)
ORDER BY e.place NULLS FIRST, j.started_at, j.id;

-- count_active --
SELECT count(*) FROM courier_jobs WHERE user_id = $1 AND status IN ('queued', 'running');

-- get_job --
SELECT * FROM courier_jobs WHERE id = $1;

-- cancel_one_job --
-- Cancels job $1 if queued or running, only if it is user $2's (any user's if $2 is NULL);
-- returns it with the status it had.
WITH target AS (
    SELECT id, status
    FROM courier_jobs
    WHERE id = $1 AND status IN ('queued', 'running') AND ($2::bigint IS NULL OR user_id = $2)
    FOR UPDATE
)
UPDATE courier_jobs j
SET status = 'cancelled', finished_at = now(), lease_until = NULL
FROM target
WHERE j.id = target.id
RETURNING j.*, target.status AS previous_status;

-- jobs_per_day --
-- Jobs created in the last $1 days, per day (UTC): how many, how many failed.
SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS jobs,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM courier_jobs
WHERE created_at > now() - make_interval(days => $1)
GROUP BY 1
ORDER BY 1;

-- command_stats --
-- Per command over the last $1 days: jobs, failures, median seconds from claim to end of the
-- succeeded ones (NULL: none succeeded).
SELECT command, count(*) AS jobs, count(*) FILTER (WHERE status = 'failed') AS failed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at))
           FILTER (WHERE status = 'succeeded') AS median_s
FROM courier_jobs
WHERE created_at > now() - make_interval(days => $1)
GROUP BY command
ORDER BY command;

-- claim_delivery --
-- Takes over, for worker $1 and $2 seconds, a delivering job whose worker's lease ran out (that
-- host died): the oldest one.
WITH next AS (
    SELECT id FROM courier_jobs
    WHERE status = 'delivering' AND lease_until < now()
    ORDER BY id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_jobs j
SET worker = $1, lease_until = now() + make_interval(secs => $2)
FROM next
WHERE j.id = next.id
RETURNING j.*;
