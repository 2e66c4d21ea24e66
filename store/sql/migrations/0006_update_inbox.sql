-- The update inbox, and a job submitted in one round trip.

-- Telegram updates that were handled by queueing (or refusing) a job, recorded in the same
-- transaction: a redelivered update (a webhook retry, polling after a restart, a second host)
-- queues nothing twice. Telegram keeps an update for at most 24 hours, so rows older than that
-- only tell which update made which job.
CREATE TABLE courier_updates (
    bot_id bigint NOT NULL,  -- Telegram id of the bot the update came to
    update_id bigint NOT NULL,
    part integer NOT NULL DEFAULT 0,  -- which of the jobs the update asks for (--n: one per result)
    job_id bigint REFERENCES courier_jobs ON DELETE SET NULL,  -- NULL: refused at the cap
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bot_id, update_id, part)
);

-- Queues a job for user p_user_id unless they have p_max_active queued or running (NULL: no cap),
-- have spent their quota (p_per_hour, p_per_day as in courier_take_quota; NULL: none), or
-- job p_part of update p_update_id of bot p_bot_id was queued or refused before (NULL: not from an
-- update).
-- job_id is NULL when nothing was queued: duplicate or spent ('hour', 'day') says why, else
-- active is the user's count.
-- The user's row is locked first and every statement reads a fresh snapshot (PL/pgSQL, READ
-- COMMITTED), so one user's submissions are counted one at a time and the cap holds under a
-- flood. The dispatchers are woken (NOTIFY) when it commits.
CREATE FUNCTION courier_submit(
    p_user_id bigint, p_username text, p_first_name text, p_language_code text,
    p_chat_id bigint, p_command text, p_params jsonb, p_max_attempts integer, p_reply_to_message_id bigint,
    p_max_active bigint, p_per_hour integer, p_per_day integer, p_bot_id bigint, p_update_id bigint,
    p_part integer, OUT job_id bigint, OUT active bigint, OUT spent text, OUT duplicate boolean)
LANGUAGE plpgsql AS $$
BEGIN
    duplicate := false;
    IF p_update_id IS NOT NULL THEN
        INSERT INTO courier_updates (bot_id, update_id, part) VALUES (p_bot_id, p_update_id, p_part)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            duplicate := true;
            RETURN;
        END IF;
    END IF;
    INSERT INTO courier_users (user_id, username, first_name, language_code)
    VALUES (p_user_id, p_username, p_first_name, p_language_code)
    ON CONFLICT (user_id) DO UPDATE
    SET username = EXCLUDED.username, first_name = EXCLUDED.first_name, language_code = EXCLUDED.language_code;
    IF p_max_active IS NOT NULL THEN
        SELECT count(*) INTO active FROM courier_jobs j
        WHERE j.user_id = p_user_id AND j.status IN ('queued', 'running');
        IF active >= p_max_active THEN
            RETURN;
        END IF;
    END IF;
    IF p_per_hour IS NOT NULL THEN
        spent := courier_take_quota(p_user_id, p_per_hour, p_per_day);
        IF spent IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    INSERT INTO courier_jobs (user_id, chat_id, command, params, max_attempts, reply_to_message_id)
    VALUES (p_user_id, p_chat_id, p_command, p_params, p_max_attempts, p_reply_to_message_id)
    RETURNING id INTO job_id;
    IF p_update_id IS NOT NULL THEN
        UPDATE courier_updates u SET job_id = courier_submit.job_id
        WHERE u.bot_id = p_bot_id AND u.update_id = p_update_id AND u.part = p_part;
    END IF;
    PERFORM pg_notify('courier_jobs', job_id::text);
END
$$;
