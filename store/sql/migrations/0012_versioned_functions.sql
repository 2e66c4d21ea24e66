-- Versioned SQL functions (docs/architecture.md, "SQL functions"): a host calls courier_submit_v1
-- and courier_take_quota_v1; the unversioned ones, which hosts from before this migration call,
-- stay, now as wrappers of the same behaviour.

-- Counts one job against the user's quota, or says which quota is spent ('hour' or 'day'; NULL:
-- counted). A limit of 0 is no limit. Locks the user's row (which must exist), so that one user's
-- concurrent submissions are counted one after the other; call it in the transaction that inserts
-- the job.
CREATE FUNCTION courier_take_quota_v1(p_user bigint, p_per_hour integer, p_per_day integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    used_hour bigint;
    used_day bigint;
BEGIN
    PERFORM 1 FROM courier_users WHERE user_id = p_user FOR UPDATE;
    SELECT count(*) FILTER (WHERE at > now() - interval '1 hour'), count(*)
    INTO used_hour, used_day
    FROM courier_quota_events
    WHERE user_id = p_user AND at > now() - interval '1 day';
    IF p_per_hour > 0 AND used_hour >= p_per_hour THEN
        RETURN 'hour';
    END IF;
    IF p_per_day > 0 AND used_day >= p_per_day THEN
        RETURN 'day';
    END IF;
    INSERT INTO courier_quota_events (user_id) VALUES (p_user);
    RETURN NULL;
END
$$;

-- Queues a job for user p_user_id unless they have p_max_active queued or running (NULL: no cap),
-- have spent their quota (p_per_hour, p_per_day as in courier_take_quota_v1; NULL: none), or
-- job p_part of update p_update_id of bot p_bot_id was queued or refused before (NULL: not from an
-- update).
-- job_id is NULL when nothing was queued: duplicate or spent ('hour', 'day') says why, else
-- active is the user's count.
-- The user's row is locked first and every statement reads a fresh snapshot (PL/pgSQL, READ
-- COMMITTED), so one user's submissions are counted one at a time and the cap holds under a
-- flood. The dispatchers are woken (NOTIFY) when it commits.
CREATE FUNCTION courier_submit_v1(
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
        spent := courier_take_quota_v1(p_user_id, p_per_hour, p_per_day);
        IF spent IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    INSERT INTO courier_jobs (user_id, chat_id, command, params, max_attempts, reply_to_message_id)
    VALUES (p_user_id, p_chat_id, p_command, p_params, p_max_attempts, p_reply_to_message_id)
    RETURNING id INTO job_id;
    IF p_update_id IS NOT NULL THEN
        UPDATE courier_updates u SET job_id = courier_submit_v1.job_id
        WHERE u.bot_id = p_bot_id AND u.update_id = p_update_id AND u.part = p_part;
    END IF;
    PERFORM pg_notify('courier_jobs', job_id::text);
END
$$;

-- Kept for hosts from before 0012 (they call it until they are upgraded): courier_take_quota_v1.
CREATE OR REPLACE FUNCTION courier_take_quota(p_user bigint, p_per_hour integer, p_per_day integer) RETURNS text
LANGUAGE sql AS $$ SELECT courier_take_quota_v1(p_user, p_per_hour, p_per_day) $$;

-- Kept for hosts from before 0012 (they call it until they are upgraded): courier_submit_v1.
CREATE OR REPLACE FUNCTION courier_submit(
    p_user_id bigint, p_username text, p_first_name text, p_language_code text,
    p_chat_id bigint, p_command text, p_params jsonb, p_max_attempts integer, p_reply_to_message_id bigint,
    p_max_active bigint, p_per_hour integer, p_per_day integer, p_bot_id bigint, p_update_id bigint,
    p_part integer, OUT job_id bigint, OUT active bigint, OUT spent text, OUT duplicate boolean)
LANGUAGE sql AS $$
    SELECT * FROM courier_submit_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
$$;
