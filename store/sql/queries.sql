-- Named queries: each starts with a `-- name --` line and runs until the next one, so keep
-- comments inside a query, below its name. Loaded by store/db.py, used as query("name").
-- Grouped by table family: migrations, users, chat sessions, jobs, commands, backends,
-- benchmark runs.

-- ping --
SELECT 1;

-- lock_migrations --
-- Serializes migrators until their transaction ends.
SELECT pg_advisory_xact_lock(hashtext('courier_migrations'));

-- create_migrations_table --
CREATE TABLE IF NOT EXISTS courier_migrations (
    name text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- applied_migrations --
SELECT name FROM courier_migrations ORDER BY name;

-- record_migration --
INSERT INTO courier_migrations (name) VALUES ($1);

-- upsert_user --
INSERT INTO courier_users (user_id, username, first_name, language_code)
VALUES ($1, $2, $3, $4)
ON CONFLICT (user_id) DO UPDATE
SET username = EXCLUDED.username,
    first_name = EXCLUDED.first_name,
    language_code = EXCLUDED.language_code
RETURNING *;

-- ensure_user --
INSERT INTO courier_users (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING;

-- get_user --
SELECT * FROM courier_users WHERE user_id = $1;

-- set_admin --
UPDATE courier_users SET is_admin = $2 WHERE user_id = $1 RETURNING *;

-- set_language --
-- The user's /lang choice ($2; NULL: their Telegram language again), for a new user too.
INSERT INTO courier_users (user_id, language) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET language = EXCLUDED.language;

-- get_user_options --
SELECT options FROM courier_user_options WHERE user_id = $1;

-- set_user_options --
INSERT INTO courier_user_options (user_id, options) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET options = EXCLUDED.options, updated_at = now();

-- clear_user_options --
DELETE FROM courier_user_options WHERE user_id = $1;

-- get_session --
SELECT * FROM courier_chat_sessions WHERE chat_id = $1 AND user_id = $2;

-- set_last_outputs --
INSERT INTO courier_chat_sessions (chat_id, user_id, last_outputs)
VALUES ($1, $2, $3)
ON CONFLICT (chat_id, user_id) DO UPDATE
SET last_outputs = EXCLUDED.last_outputs, updated_at = now();

-- session_summaries --
-- Per user, most recently active first: chats with a session, jobs by status, last activity.
SELECT u.user_id, u.username, u.first_name, u.is_admin,
       coalesce(s.chats, 0) AS chats,
       coalesce(j.queued, 0) AS queued, coalesce(j.running, 0) AS running,
       coalesce(j.succeeded, 0) AS succeeded, coalesce(j.failed, 0) AS failed,
       coalesce(j.cancelled, 0) AS cancelled,
       greatest(s.last_result_at, j.last_job_at) AS last_active_at
FROM courier_users u
LEFT JOIN (
    SELECT user_id, count(*) AS chats, max(updated_at) AS last_result_at
    FROM courier_chat_sessions GROUP BY user_id
) s USING (user_id)
LEFT JOIN (
    SELECT user_id,
           count(*) FILTER (WHERE status = 'queued') AS queued,
           count(*) FILTER (WHERE status = 'running') AS running,
           count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
           max(created_at) AS last_job_at
    FROM courier_jobs GROUP BY user_id
) j USING (user_id)
ORDER BY last_active_at DESC NULLS LAST, u.user_id
LIMIT $1;

-- submit_jobs --
-- Queue jobs in one statement and one transaction, in the order given (courier_submit_v1 each; its
-- later calls see what the earlier ones wrote): each array holds one element per job, in the
-- function's order of arguments, $7 each job's params as JSON text. One row per job, in order.
SELECT s.job_id, s.active, s.spent, s.duplicate
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::integer[],
            $9::bigint[], $10::bigint[], $11::integer[], $12::integer[], $13::bigint[], $14::bigint[],
            $15::integer[])
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
WITH backend AS (
    SELECT b.models
    FROM courier_backends b
    WHERE b.url = $3 AND b.healthy AND NOT b.draining
    UNION ALL
    SELECT NULL WHERE $3::text IS NULL
), next AS (
    SELECT j.id
    FROM courier_jobs j
    JOIN courier_users u ON u.user_id = j.user_id
    CROSS JOIN backend b
    WHERE j.status = 'queued' AND (j.params->>'backend' IS NULL OR j.params->>'backend' = $3 OR $3::text IS NULL)
        AND (b.models IS NULL OR NOT EXISTS (
        SELECT 1
        FROM jsonb_path_query(j.params, '$.workflow.*.inputs.* ? (@.type() == "string")') AS input(value)
        WHERE NOT b.models @> input.value AND EXISTS (
            SELECT 1 FROM courier_backends o
            WHERE o.healthy AND NOT o.draining AND o.checked_at > now() - interval '1 minute'
                AND o.models @> input.value)))
    ORDER BY u.last_served_at ASC NULLS FIRST, j.id
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
)
SELECT * FROM claimed;

-- extend_lease --
UPDATE courier_jobs
SET lease_until = now() + make_interval(secs => $3)
WHERE id = $1 AND worker = $2 AND status IN ('running', 'delivering')
RETURNING id;

-- set_progress --
UPDATE courier_jobs SET progress = $2 WHERE id = $1 AND status = 'running' RETURNING id;

-- adopt_status_message --
-- Makes message $2 the status message of job $1 unless it has one already (the bot's "Queued"
-- reply and the dispatcher's first progress message race for it); returns the one that is.
-- A job still queued wakes the dispatchers again: a claim while this held its row skipped it
-- (SKIP LOCKED), and would otherwise wait for the next job or the idle poll.
WITH adopted AS (
    UPDATE courier_jobs SET status_message_id = COALESCE(status_message_id, $2) WHERE id = $1
    RETURNING status, status_message_id
)
SELECT adopted.status_message_id FROM adopted
LEFT JOIN LATERAL (SELECT pg_notify('courier_jobs', $1::text) WHERE adopted.status = 'queued') AS woken ON true;

-- move_status_message --
-- The status message of job $1 is now message $2 (a live preview turned it into a photo, or the
-- final text replaced that photo), so that /forget deletes the one the chat shows.
UPDATE courier_jobs SET status_message_id = $2 WHERE id = $1;

-- take_status_message --
-- Where worker $2 shows the status of job $1 (courier_take_status_v1): decision, message.
SELECT decision, message FROM courier_take_status_v1($1, $2);

-- claim_queue_message --
-- Chat $1's queue message is ours to send for $2 seconds, unless another host is sending it (then
-- no row); its message id (NULL: none posted yet) and the text it shows.
INSERT INTO courier_queue_messages AS m (chat_id, busy_until) VALUES ($1, now() + make_interval(secs => $2))
ON CONFLICT (chat_id) DO UPDATE SET busy_until = EXCLUDED.busy_until
    WHERE m.busy_until IS NULL OR m.busy_until <= now()
RETURNING m.message_id, m.shown;

-- settle_queue_message --
-- Chat $1's queue message is message $2 showing text $3, and nobody is sending it.
UPDATE courier_queue_messages SET message_id = $2, shown = $3, busy_until = NULL WHERE chat_id = $1;

-- drop_queue_message --
-- Chat $1 has no queue message any more (none went, or it says something else now).
DELETE FROM courier_queue_messages WHERE chat_id = $1;

-- chat_queue --
-- The queued jobs of chat $1 in claim order (at most $2), each with its place in the whole queue:
-- courier_queue's position for these jobs alone (the view computes every queued job's, against every
-- user's turn: under a flood each queue message's update would cost queued jobs × users rows). A
-- job's place depends only on its user's turn and its rank k among its user's jobs: it is computed
-- once per (user, k), the queued jobs counted per user before their users' rows are joined. A job
-- queued again after it ran (its backend died) has a status message of its own, which says so: it is
-- not listed (a "Queued" line would come after that later state), though it keeps its place.
WITH counts AS (
    SELECT user_id, count(*) AS n, min(id) AS first_id FROM courier_jobs WHERE status = 'queued' GROUP BY user_id
), turns AS (
    SELECT c.user_id, c.n, row_number() OVER (ORDER BY u.last_served_at ASC NULLS FIRST, c.first_id) AS turn
    FROM counts c
    JOIN courier_users u ON u.user_id = c.user_id
), mine AS (
    SELECT * FROM (
        SELECT j.id, j.chat_id, j.user_id, j.command, j.params->>'language' AS language, j.reply_to_message_id,
               j.status_message_id, row_number() OVER (PARTITION BY j.user_id ORDER BY j.id) AS k
        FROM courier_jobs j
        WHERE j.status = 'queued'
          AND j.user_id IN (SELECT c.user_id FROM courier_jobs c WHERE c.chat_id = $1 AND c.status = 'queued')
    ) theirs
    WHERE theirs.chat_id = $1 AND theirs.status_message_id IS NULL
), places AS (
    SELECT ranks.user_id, ranks.k,
           1 + sum(least(o.n, ranks.k - 1) + (o.turn < me.turn AND o.n >= ranks.k)::int)::bigint AS position
    FROM (SELECT DISTINCT user_id, k FROM mine) ranks
    JOIN turns me ON me.user_id = ranks.user_id
    CROSS JOIN turns o
    GROUP BY ranks.user_id, ranks.k
)
SELECT m.id, m.command, m.language, m.reply_to_message_id, p.position
FROM mine m
JOIN places p ON p.user_id = m.user_id AND p.k = m.k
ORDER BY p.position
LIMIT $2;

-- queue_estimate --
-- For chat $1's queue message: the median run time of the last 50 succeeded jobs (NULL: none
-- yet), the prompts the backends taking jobs run at once, and whether a running job of the chat
-- still has no status message (it takes the queue message once the chat's queue is empty).
SELECT (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY recent.seconds)
        FROM (SELECT extract(epoch FROM finished_at - started_at) AS seconds
              FROM courier_jobs
              WHERE status = 'succeeded' AND started_at IS NOT NULL
              ORDER BY finished_at DESC
              LIMIT 50) recent) AS median_s,
       (SELECT coalesce(sum(capacity), 0) FROM courier_backends WHERE healthy AND NOT draining) AS slots,
       EXISTS (SELECT 1 FROM courier_jobs
               WHERE chat_id = $1 AND status = 'running' AND status_message_id IS NULL) AS taker;

-- forget_queue_message --
-- Deletes the queue message of user $1's private chat (its chat id is theirs); returns it.
DELETE FROM courier_queue_messages WHERE chat_id = $1 AND message_id IS NOT NULL
RETURNING chat_id, message_id;

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
-- Running jobs (oldest first), then queued jobs in claim order; only user $1's unless NULL.
SELECT j.*, q.position
FROM courier_jobs j
LEFT JOIN courier_queue q ON q.job_id = j.id
WHERE j.status IN ('running', 'queued') AND ($1::bigint IS NULL OR j.user_id = $1)
ORDER BY q.position NULLS FIRST, j.started_at, j.id;

-- count_active --
SELECT count(*) FROM courier_jobs WHERE user_id = $1 AND status IN ('queued', 'running');

-- get_job --
SELECT * FROM courier_jobs WHERE id = $1;

-- put_command --
-- Creates or replaces a command; its enabled flag is kept on replace.
INSERT INTO courier_commands (name, description, workflow, owner, source)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO UPDATE
SET description = EXCLUDED.description,
    workflow = EXCLUDED.workflow,
    owner = EXCLUDED.owner,
    source = EXCLUDED.source,
    updated_at = now()
RETURNING *;

-- seed_command --
-- Adds a shipped command, or refreshes one that is still the shipped version; published
-- commands of the same name win.
INSERT INTO courier_commands (name, description, workflow, owner, source)
VALUES ($1, $2, $3, $4, 'seed')
ON CONFLICT (name) DO UPDATE
SET description = EXCLUDED.description, workflow = EXCLUDED.workflow, updated_at = now()
WHERE courier_commands.source = 'seed'
    AND (courier_commands.description, courier_commands.workflow)
        IS DISTINCT FROM (EXCLUDED.description, EXCLUDED.workflow)
RETURNING *;

-- get_command --
SELECT * FROM courier_commands WHERE name = $1;

-- get_command_for_user --
-- Command $1 (its columns NULL if there is none) and user $2's default options (NULL: none), as
-- admit_users gives them for the command an update names.
SELECT c.*, (SELECT options FROM courier_user_options WHERE user_id = $2) AS user_options
FROM (SELECT 1) AS one LEFT JOIN courier_commands c ON c.name = $1;

-- set_command_defaults --
-- The options an admin set for command $1 ("" clears them); NULL if there is no such command.
UPDATE courier_commands SET defaults = $2 WHERE name = $1 RETURNING defaults;

-- list_commands --
SELECT * FROM courier_commands WHERE enabled OR NOT $1 ORDER BY name;

-- command_node_types --
-- The node types of every command's graph (enabled or not): what the gateway lets a bot queue.
SELECT DISTINCT node->>'class_type' AS class_type
FROM courier_commands, jsonb_each(workflow) AS n(id, node)
WHERE jsonb_typeof(node) = 'object' AND node ? 'class_type';

-- set_command_enabled --
UPDATE courier_commands SET enabled = $2, updated_at = now() WHERE name = $1 RETURNING *;

-- delete_command --
DELETE FROM courier_commands WHERE name = $1 RETURNING name;

-- register_backend --
INSERT INTO courier_backends (url, capacity) VALUES ($1, $2)
ON CONFLICT (url) DO UPDATE SET url = EXCLUDED.url
RETURNING *;

-- list_backends --
-- Every backend with how many jobs run on it now; only those of urls $1 unless NULL.
SELECT b.*, (SELECT count(*) FROM courier_jobs j WHERE j.status = 'running' AND j.backend = b.url) AS running
FROM courier_backends b
WHERE $1::text[] IS NULL OR b.url = any($1::text[])
ORDER BY b.id;

-- record_check --
-- The outcome of a health check of backend $1: healthy (error $2 NULL, models $3 and their
-- kinds $4 unless NULL) or not. Returns whether it has recovered (was unhealthy, is healthy now).
UPDATE courier_backends b
SET healthy = $2::text IS NULL,
    last_error = $2,
    checked_at = now(),
    last_seen_at = CASE WHEN $2::text IS NULL THEN now() ELSE b.last_seen_at END,
    models = CASE WHEN $2::text IS NULL THEN coalesce($3, b.models) ELSE b.models END,
    model_kinds = CASE WHEN $2::text IS NULL THEN coalesce($4, b.model_kinds) ELSE b.model_kinds END
FROM courier_backends before
WHERE b.url = $1 AND before.id = b.id
RETURNING NOT before.healthy AND b.healthy AS recovered;

-- mark_stale_backends --
-- Backends that are not among urls $1 (this host's) and that no host has checked successfully for
-- $2 seconds (a ComfyUI of an earlier run): down, with error $3, so nothing is queued for them.
UPDATE courier_backends
SET healthy = false, last_error = $3, checked_at = now()
WHERE healthy AND NOT url = any($1::text[])
    AND coalesce(last_seen_at, created_at) < now() - make_interval(secs => $2)
RETURNING url;

-- set_backend --
-- Drains/undrains backend $1 (id) or sets its capacity; NULL leaves a value as it is.
UPDATE courier_backends
SET draining = coalesce($2, draining), capacity = coalesce($3, capacity)
WHERE id = $1
RETURNING *;

-- insert_benchmark_run --
INSERT INTO courier_benchmark_runs (workflow, device, host, comfyui_version, torch_version,
                                    repeats, warmup, wall_s, stats, per_node,
                                    peak_memory_bytes, extra)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING *;

-- get_benchmark_run --
SELECT * FROM courier_benchmark_runs WHERE id = $1;

-- list_benchmark_runs --
-- Newest first; $1 filters by workflow unless NULL.
SELECT * FROM courier_benchmark_runs
WHERE $1::text IS NULL OR workflow = $1
ORDER BY created_at DESC, id DESC
LIMIT $2;

-- admit_users --
-- Who may use the bot (courier_admit_v1), for the senders of several updates in one statement and
-- one transaction, in the order given: $1 the users, $2 their @usernames (lower case, no @; NULL:
-- none), $6 the command each update names (NULL: none), one element per update; $3 the ids the
-- settings let in, $4 the allowed usernames, $5 whether the settings let everyone in, for all.
-- With a command come its row (its columns NULL if there is none) and the user's default options
-- (user_options): a command's update needs no other query before its job. One row per update, in order.
SELECT a.banned, a.language, a.allowed, a.admin, a.owner_wanted, c.*,
       (SELECT options FROM courier_user_options o WHERE o.user_id = r.user_id AND r.command IS NOT NULL)
           AS user_options
FROM unnest($1::bigint[], $2::text[], $6::text[]) WITH ORDINALITY AS r(user_id, username, command, n)
CROSS JOIN LATERAL courier_admit_v1(r.user_id, r.username, $3::bigint[], $4::text[], $5) AS a
LEFT JOIN courier_commands c ON c.name = r.command
ORDER BY r.n;

-- allow_user --
-- /allow: user $1 is let in, known or not yet.
INSERT INTO courier_users (user_id, allowed) VALUES ($1, true)
ON CONFLICT (user_id) DO UPDATE SET allowed = true;

-- disallow_user --
-- /disallow: user $1 is no longer let in by /allow; returns whether /allow had let them in.
UPDATE courier_users SET allowed = false WHERE user_id = $1 AND allowed RETURNING user_id;

-- may_receive --
-- Whether user $1 may be sent a render from the graph editor, by the same rules as courier_admit_v1
-- ($2 the ids the settings let in, the admins' among them, $3 the allowed usernames, $4 everyone)
-- but read-only: no username is bound, no row written. An admin made in PostgreSQL may; a banned
-- user may not; anyone else if the settings, /allow or an allowed username bound to them let them
-- in. COURIER_ADMIN_USERS are never banned: the caller lets them in without asking.
WITH known AS (
    SELECT banned, allowed, is_admin FROM courier_users WHERE user_id = $1
)
SELECT coalesce((SELECT is_admin FROM known), false)
       OR (NOT coalesce((SELECT banned FROM known), false)
           AND ($4 OR $1 = ANY($2::bigint[])
                OR coalesce((SELECT allowed FROM known), false)
                OR EXISTS (SELECT 1 FROM courier_allowed_names WHERE user_id = $1 AND username = ANY($3::text[]))));

-- stored_admins --
-- The admins made in PostgreSQL (by an owner code), beside COURIER_ADMIN_USERS.
SELECT user_id FROM courier_users WHERE is_admin ORDER BY user_id;

-- add_owner_code --
-- Adds the hash $1 of a fresh owner code while the bot has no admin in PostgreSQL; returns it if added.
INSERT INTO courier_owner_codes (code_hash)
SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM courier_users WHERE is_admin)
RETURNING code_hash;

-- lock_owner_codes --
-- The pending owner codes' hashes, locked: a concurrent claim waits, then finds them spent.
SELECT code_hash FROM courier_owner_codes FOR UPDATE;

-- make_owner --
-- User $1 becomes an admin unless the bot has one in PostgreSQL already; every owner code is
-- spent either way. Returns the user's id if they were made one.
WITH spent AS (
    DELETE FROM courier_owner_codes
)
INSERT INTO courier_users (user_id, is_admin, allowed)
SELECT $1, true, true WHERE NOT EXISTS (SELECT 1 FROM courier_users WHERE is_admin)
ON CONFLICT (user_id) DO UPDATE SET is_admin = true, allowed = true, banned = false
RETURNING user_id;

-- user_by_username --
-- The id of the user last seen with @$1 (lower case, no @); none if nobody was.
SELECT user_id FROM courier_users WHERE lower(username) = $1;

-- set_banned --
-- Bans ($2 true) or unbans user $1, known or not yet.
INSERT INTO courier_users (user_id, banned) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET banned = EXCLUDED.banned
RETURNING banned;

-- quota_usage --
-- User $1's jobs counted in the last hour and day, and when the oldest of each leaves its window.
SELECT count(*) FILTER (WHERE at > now() - interval '1 hour') AS hour,
       count(*) AS day,
       min(at) FILTER (WHERE at > now() - interval '1 hour') + interval '1 hour' AS hour_frees_at,
       min(at) + interval '1 day' AS day_frees_at
FROM courier_quota_events
WHERE user_id = $1 AND at > now() - interval '1 day';

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

-- put_pending_action --
INSERT INTO courier_pending_actions (token, user_id, chat_id, action, payload, expires_at)
VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6));

-- pending_action_user --
SELECT user_id FROM courier_pending_actions WHERE token = $1 AND expires_at > now();

-- take_pending_action --
-- The pending action behind a button, once, and only for the user it was made for, while valid.
DELETE FROM courier_pending_actions
WHERE token = $1 AND user_id = $2 AND action = $3 AND expires_at > now()
RETURNING *;

-- forget_user_jobs --
-- Deletes every job of user $1; returns what they left outside the database: files on backends,
-- the bot's messages.
DELETE FROM courier_jobs WHERE user_id = $1
RETURNING id, chat_id, backend, status_message_id, params->>'image_file_id' IS NOT NULL AS had_input, result;

-- forget_user_rest --
-- The rest of user $1's data: chat sessions, pending actions, default options, and the profile in
-- their row. The row itself stays with what access control needs: the ban, admin flag and turn in
-- the queue; the quota counters stay in courier_quota_events.
WITH sessions AS (
    DELETE FROM courier_chat_sessions WHERE user_id = $1
), pending AS (
    DELETE FROM courier_pending_actions WHERE user_id = $1
), options AS (
    DELETE FROM courier_user_options WHERE user_id = $1
)
UPDATE courier_users SET username = NULL, first_name = NULL, language_code = NULL, language = NULL
WHERE user_id = $1;

-- purge_old_jobs --
-- Deletes up to $2 finished jobs created more than $1 days ago, oldest first; returns what they
-- left outside the database, as forget_user_jobs does.
DELETE FROM courier_jobs
WHERE id IN (
    SELECT id FROM courier_jobs
    WHERE status IN ('succeeded', 'failed', 'cancelled') AND created_at < now() - make_interval(days => $1)
    ORDER BY id
    LIMIT $2
)
RETURNING id, chat_id, backend, status_message_id, params->>'image_file_id' IS NOT NULL AS had_input, result;

-- purge_old_rest --
-- Chat sessions untouched for $1 days, quota counters older than a day, expired pending actions.
WITH sessions AS (
    DELETE FROM courier_chat_sessions WHERE updated_at < now() - make_interval(days => $1)
), pending AS (
    DELETE FROM courier_pending_actions WHERE expires_at < now()
)
DELETE FROM courier_quota_events WHERE at < now() - interval '1 day';

-- begin_delivery --
-- Claims the send of output $2 of job $1 while the job runs (or delivers) for worker $3; returns nothing if
-- the output already has a row or the job is no longer $3's (cancelled, its lease lost).
INSERT INTO courier_deliveries (job_id, output, status)
SELECT id, $2, 'sending' FROM courier_jobs WHERE id = $1 AND status IN ('running', 'delivering') AND worker = $3
ON CONFLICT DO NOTHING
RETURNING job_id;

-- park_job --
-- Job $1, running for worker $2, waits for Telegram: it becomes 'delivering' with its files
-- ($3 outputs, $4 file names, $5 subfolders, $6 types, $7 vias, $8 bytes, in order); returns when
-- it began to wait. Nothing if the job is no longer $2's (cancelled, its lease lost).
WITH parked AS (
    UPDATE courier_jobs SET status = 'delivering'
    WHERE id = $1 AND worker = $2 AND status = 'running'
    RETURNING id
), kept AS (
    INSERT INTO courier_outbox (job_id, position, output, filename, subfolder, type, via, data, parked_at)
    SELECT parked.id, f.position - 1, f.output, f.filename, f.subfolder, f.type, f.via, f.data, now()
    FROM parked, unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bytea[])
        WITH ORDINALITY AS f (output, filename, subfolder, type, via, data, position)
)
SELECT now() FROM parked;

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

-- outbox_files --
-- The files delivering job $1 waits to send, in order, and when it began to wait.
SELECT output, filename, subfolder, type, via, data, parked_at FROM courier_outbox WHERE job_id = $1 ORDER BY position;

-- get_delivery --
SELECT status, record FROM courier_deliveries WHERE job_id = $1 AND output = $2;

-- complete_delivery --
UPDATE courier_deliveries SET status = 'sent', record = $3, updated_at = now() WHERE job_id = $1 AND output = $2;

-- drop_delivery --
DELETE FROM courier_deliveries WHERE job_id = $1 AND output = $2;

-- keep_polled_updates --
-- $2, $3: the update ids and their JSON; returns the ids of those not kept before.
INSERT INTO courier_polled_updates (bot_id, update_id, payload)
SELECT $1, t.update_id, t.payload FROM unnest($2::bigint[], $3::text[]) AS t (update_id, payload)
ON CONFLICT DO NOTHING
RETURNING update_id;

-- unhandled_polled_updates --
SELECT update_id, payload FROM courier_polled_updates
WHERE bot_id = $1 AND handled_at IS NULL ORDER BY update_id;

-- polled_updates_handled --
-- The payload goes: only the ids are needed to know the update again, and no sender's profile
-- or text (an owner code, a refused stranger's message) stays for the day the row does.
UPDATE courier_polled_updates SET handled_at = now(), payload = '' WHERE bot_id = $1 AND update_id = ANY($2::bigint[]);

-- forget_old_polled_updates --
DELETE FROM courier_polled_updates WHERE handled_at < now() - interval '1 day';

-- webhook_secret --
-- The webhook secret of bot $1: $2 for a bot that has none yet, else the one it has (a host that
-- races another one's insert waits for it and gets its secret).
INSERT INTO courier_webhook_secrets (bot_id, secret) VALUES ($1, $2)
ON CONFLICT (bot_id) DO UPDATE SET bot_id = EXCLUDED.bot_id
RETURNING secret;

-- spend_editor_nonce --
-- Whether editor-proof nonce $1 is spent now by Telegram Output node $2 (NULL: it was before, on any
-- host of the database); kept until $3 (epoch seconds). Expired nonces are dropped on the way.
WITH expired AS (
    DELETE FROM courier_editor_nonces WHERE expires_at < now()
)
INSERT INTO courier_editor_nonces (nonce, node_id, expires_at) VALUES ($1, $2, to_timestamp($3))
ON CONFLICT (nonce, node_id) DO NOTHING
RETURNING true;

-- issue_buttons --
-- The token of job $2's buttons: $1 for a job that has none yet, else the one it has.
INSERT INTO courier_result_buttons (token, job_id) VALUES ($1, $2)
ON CONFLICT (job_id) DO UPDATE SET job_id = EXCLUDED.job_id
RETURNING token;

-- button_job --
-- The job behind a button's token $1.
SELECT j.* FROM courier_result_buttons b JOIN courier_jobs j ON j.id = b.job_id WHERE b.token = $1;

-- press_button --
-- Records the first press of action $2 under token $1; returns nothing for any later press.
INSERT INTO courier_button_presses (token, action) VALUES ($1, $2)
ON CONFLICT DO NOTHING
RETURNING true;

-- unpress_button --
-- The press queued nothing after all (the user is at their cap or out of quota): it may come again.
DELETE FROM courier_button_presses WHERE token = $1 AND action = $2;

-- user_history --
-- User $1's last $3 results in chat $2: succeeded jobs of a command (not benchmark sessions), newest
-- first.
SELECT * FROM courier_jobs
WHERE user_id = $1 AND chat_id = $2 AND status = 'succeeded' AND NOT params ? 'kind'
ORDER BY id DESC
LIMIT $3;

-- put_pending_edit --
-- Waits for the instruction of an edit of job $5's result by user $2 in chat $3 for $6 seconds, under
-- token $1 (payload $4). A valid wait for the same job stays as it is: nothing is returned then.
INSERT INTO courier_pending_actions (token, user_id, chat_id, action, payload, expires_at)
VALUES ($1, $2, $3, 'edit', $4, now() + make_interval(secs => $6))
ON CONFLICT (user_id, chat_id) WHERE action = 'edit' DO UPDATE
SET token = EXCLUDED.token, payload = EXCLUDED.payload, created_at = now(), expires_at = EXCLUDED.expires_at
WHERE courier_pending_actions.expires_at <= now()
   OR (courier_pending_actions.payload->>'job_id')::bigint IS DISTINCT FROM $5
RETURNING token;

-- take_pending_edit --
-- The edit user $1 waits to instruct in chat $2, removed; nothing when none is waiting or it expired.
WITH taken AS (
    DELETE FROM courier_pending_actions WHERE user_id = $1 AND chat_id = $2 AND action = 'edit'
    RETURNING *
)
SELECT * FROM taken WHERE expires_at > now();

-- delete_result --
-- Deletes finished job $1 of user $2 and drops its outputs from the user's chat sessions; returns
-- what it left outside the database, as forget_user_jobs does.
WITH sessions AS (
    UPDATE courier_chat_sessions
    SET last_outputs = (SELECT coalesce(jsonb_agg(o), '[]') FROM jsonb_array_elements(last_outputs) o
                        WHERE o->>'job_id' IS DISTINCT FROM $1::bigint::text),
        updated_at = now()
    WHERE user_id = $2
)
DELETE FROM courier_jobs WHERE id = $1 AND user_id = $2 AND status IN ('succeeded', 'failed', 'cancelled')
RETURNING id, chat_id, backend, status_message_id, params->>'image_file_id' IS NOT NULL AS had_input, result;

-- take_send_slots --
-- Reports the answered slots $7 (answered $8 ms ago) of bot $1 (sha256 of its token), then takes up to
-- $2 of the $3 slots in any $4 ms; see courier_take_send_slots_v1.
SELECT slots, wait_ms FROM courier_take_send_slots_v1($1, $2, $3, $4, $5, $6, $7, $8);

-- inline_results --
-- Inline mode: the files of user $1's jobs that reached the chat (courier_deliveries 'sent', from the
-- moment Telegram took each), newest job first, $3 of them from position $4. A job is listed when
-- each of the words $2 is in its command line (command, prompt, options; any case) or is the token
-- of its result buttons (what a result's 📤 Share button types). Another user's jobs never: they are
-- not asked for. Jobs /forget or 🗑 deleted are gone with their rows.
SELECT j.id AS job_id, j.command, coalesce(j.params->>'prompt', '') AS prompt,
       row_number() OVER (PARTITION BY j.id ORDER BY d.output) AS position, d.record AS output
FROM courier_jobs j
JOIN courier_deliveries d ON d.job_id = j.id AND d.status = 'sent' AND jsonb_typeof(d.record->'file_id') = 'string'
LEFT JOIN courier_result_buttons b ON b.job_id = j.id
WHERE j.user_id = $1
  AND NOT EXISTS (
      SELECT 1 FROM unnest($2::text[]) AS w(word)
      WHERE strpos(lower(j.command || ' ' || coalesce(j.params->>'prompt', '') || ' '
                         || coalesce(j.params->>'options', '')), lower(w.word)) = 0
        AND w.word IS DISTINCT FROM b.token)
ORDER BY j.id DESC, position
LIMIT $3 OFFSET $4;
