-- The named queries of store/sessions.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

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
