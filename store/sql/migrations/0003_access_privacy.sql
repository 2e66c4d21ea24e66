-- Access control and privacy (issue 12, steps 6 and 7): bans, the @usernames of COURIER_ALLOWED_USERS
-- bound to an id on first contact, quota counters that outlive /forget and the jobs they counted,
-- pending confirmations that outlive a restart, and the quota check as one function that a job
-- insert calls in its own transaction.

ALTER TABLE courier_users ADD COLUMN banned boolean NOT NULL DEFAULT false;

CREATE INDEX courier_users_username_idx ON courier_users (lower(username));  -- /ban @username

CREATE TABLE courier_allowed_names (
    username text PRIMARY KEY,  -- an allowed @username, lower case, without the @
    user_id bigint NOT NULL,  -- who had it on first contact; a later owner of the name is not them
    bound_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_quota_events (
    user_id bigint NOT NULL,  -- no foreign key: the counters stay when /forget deletes the user's jobs
    at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX courier_quota_events_user_idx ON courier_quota_events (user_id, at);

CREATE TABLE courier_pending_actions (
    token text PRIMARY KEY,  -- the random part of a button's callback data
    user_id bigint NOT NULL,  -- only this user may press it
    chat_id bigint NOT NULL,
    action text NOT NULL,  -- forget, ...
    payload jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX courier_pending_actions_user_idx ON courier_pending_actions (user_id);

-- Counts one job against the user's quota, or says which quota is spent ('hour' or 'day'; NULL:
-- counted). A limit of 0 is no limit. Locks the user's row (which must exist), so that one user's
-- concurrent submissions are counted one after the other; call it in the transaction that inserts
-- the job.
CREATE FUNCTION courier_take_quota(p_user bigint, p_per_hour integer, p_per_day integer) RETURNS text
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
