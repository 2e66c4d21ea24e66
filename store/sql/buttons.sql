-- The named queries of store/buttons.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

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
-- Waits for the instruction of an edit of job :job_id's result by user :user_id in chat :chat_id for
-- :valid_s seconds, under :token (with :payload). A valid wait for the same job stays as it is:
-- nothing is returned then.
INSERT INTO courier_pending_actions (token, user_id, chat_id, action, payload, expires_at)
VALUES (:token, :user_id, :chat_id, 'edit', :payload, now() + make_interval(secs => :valid_s))
ON CONFLICT (user_id, chat_id) WHERE action = 'edit' DO UPDATE
SET token = EXCLUDED.token, payload = EXCLUDED.payload, created_at = now(), expires_at = EXCLUDED.expires_at
WHERE courier_pending_actions.expires_at <= now()
   OR (courier_pending_actions.payload->>'job_id')::bigint IS DISTINCT FROM :job_id
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
