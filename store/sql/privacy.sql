-- The named queries of store/privacy.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- forget_queue_message --
-- Deletes the queue message of user $1's private chat (its chat id is theirs); returns it.
DELETE FROM courier_queue_messages WHERE chat_id = $1 AND message_id IS NOT NULL
RETURNING chat_id, message_id;

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
