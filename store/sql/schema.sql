-- The full schema after all migrations, for reading and for the test that diffs it against
-- migrations/. The migrator keeps its own bookkeeping table, courier_migrations.

CREATE TABLE courier_users (
    user_id bigint PRIMARY KEY,  -- Telegram user id
    username text,
    first_name text,
    language_code text,
    is_admin boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_served_at timestamptz,  -- when a job of this user was last claimed; NULL = never (served first)
    language text,  -- chosen with /lang (a catalog: en, de, ru...); NULL = their Telegram language_code
    banned boolean NOT NULL DEFAULT false,  -- /ban; survives /forget
    allowed boolean NOT NULL DEFAULT false  -- /allow; survives /forget
);

CREATE INDEX courier_users_username_idx ON courier_users (lower(username));  -- /ban @username

CREATE TABLE courier_user_options (
    user_id bigint PRIMARY KEY REFERENCES courier_users ON DELETE CASCADE,
    options text NOT NULL,  -- a user's default options (/settings), as typed: "--ar 16:9 --steps 4"
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_chat_sessions (
    chat_id bigint NOT NULL,
    user_id bigint NOT NULL REFERENCES courier_users ON DELETE CASCADE,
    -- [{kind: image|video, file_id, filename, subfolder, type, job_id}], for "edit my last result"
    last_outputs jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(last_outputs) = 'array'),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, user_id)
);

CREATE TABLE courier_jobs (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES courier_users ON DELETE CASCADE,
    chat_id bigint NOT NULL,
    command text NOT NULL,
    params jsonb NOT NULL DEFAULT '{}',  -- prompt text, seed, input image refs...
    -- queued: waiting to be claimed
    -- running: claimed by `worker` until `lease_until`; back to queued if the lease expires
    -- delivering: rendered, its results waiting for Telegram (courier_outbox); `worker` tries them
    --   again until `lease_until`, then any host takes it over (never rendered again)
    -- succeeded, failed, cancelled: final
    status text NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'delivering', 'succeeded', 'failed', 'cancelled')),
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    lease_until timestamptz,
    worker text,
    backend text,
    status_message_id bigint,
    reply_to_message_id bigint,
    progress jsonb,
    result jsonb,
    error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
);

CREATE INDEX courier_jobs_queued_idx ON courier_jobs (user_id, id) WHERE status = 'queued';
CREATE INDEX courier_jobs_running_idx ON courier_jobs (lease_until) WHERE status = 'running';
CREATE INDEX courier_jobs_user_idx ON courier_jobs (user_id, id);
CREATE INDEX courier_jobs_backend_idx ON courier_jobs (backend) WHERE status = 'running';
CREATE INDEX courier_jobs_delivering_idx ON courier_jobs (lease_until) WHERE status = 'delivering';

-- One row per output of a job sent or being sent to the chat, written before the send: a re-run
-- of the job sends none that has one ('sending' is an unknown outcome). A sure failure deletes it.
CREATE TABLE courier_deliveries (
    job_id bigint NOT NULL REFERENCES courier_jobs ON DELETE CASCADE,
    output text NOT NULL,  -- "<node id>:<index>", the same in every run of the job
    status text NOT NULL CHECK (status IN ('sending', 'sent')),
    record jsonb,  -- what the chat answered (file id, message ids), once sent
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, output)
);

-- The files of a 'delivering' job (its results waiting for Telegram), until the job ends.
CREATE TABLE courier_outbox (
    job_id bigint NOT NULL REFERENCES courier_jobs ON DELETE CASCADE,
    position integer NOT NULL,  -- the file's place among the job's results
    output text NOT NULL,  -- "<node id>:<index>", as in courier_deliveries
    filename text NOT NULL,
    subfolder text NOT NULL,
    type text NOT NULL,
    via text NOT NULL,
    data bytea NOT NULL,
    parked_at timestamptz NOT NULL DEFAULT now(),  -- when the job began to wait: its patience counts from here
    PRIMARY KEY (job_id, position)
);

-- Queued jobs and their place in the claim order (1 = claimed next): users take turns, least
-- recently served first, each turn taking the user's oldest job. Job k of a user waits for up to
-- k-1 jobs of every user, plus one more of each user whose turn comes first and who has k or more.
CREATE VIEW courier_queue AS
WITH queued AS (
    SELECT id, user_id, row_number() OVER (PARTITION BY user_id ORDER BY id) AS k
    FROM courier_jobs
    WHERE status = 'queued'
), turns AS (
    SELECT q.user_id, count(*) AS n,
           row_number() OVER (ORDER BY u.last_served_at ASC NULLS FIRST, min(q.id)) AS turn
    FROM queued q
    JOIN courier_users u ON u.user_id = q.user_id
    GROUP BY q.user_id, u.last_served_at
)
SELECT q.id AS job_id,
       1 + sum(least(o.n, q.k - 1) + (o.turn < mine.turn AND o.n >= q.k)::int)::bigint AS position
FROM queued q
JOIN turns mine ON mine.user_id = q.user_id
CROSS JOIN turns o
GROUP BY q.id, q.k, mine.turn;

CREATE TABLE courier_commands (
    name text PRIMARY KEY CHECK (name ~ '^[a-z0-9_]{1,32}$'),  -- a Telegram bot command
    description text NOT NULL DEFAULT '',
    workflow jsonb NOT NULL CHECK (jsonb_typeof(workflow) = 'object'),  -- ComfyUI API format
    owner text,  -- Telegram user id of the publisher, or a label
    enabled boolean NOT NULL DEFAULT true,
    source text NOT NULL CHECK (source IN ('seed', 'published')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    defaults text NOT NULL DEFAULT ''  -- options an admin set for everyone, "--model sdxl" (/settings /name)
);

CREATE TABLE courier_backends (
    id bigserial PRIMARY KEY,
    url text NOT NULL UNIQUE,  -- as in COURIER_BACKENDS; the dispatcher of each host registers its own
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz,  -- its last good health check
    last_error text,
    capacity integer NOT NULL DEFAULT 1 CHECK (capacity >= 1),  -- prompts a host keeps on it at once
    healthy boolean NOT NULL DEFAULT true,  -- answered its last check; claims stop while false
    draining boolean NOT NULL DEFAULT false,  -- finishes what it runs, takes nothing new
    -- model file names its /object_info lists (e.g. "sd_xl_base_1.0.safetensors")
    models jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(models) = 'array'),
    checked_at timestamptz,
    -- its model files by kind: {"checkpoints": [...], "loras": [...]} (jobs/model_names.py)
    model_kinds jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(model_kinds) = 'object'),
    -- the model files of the last job claimed on it, which ComfyUI keeps loaded (claim_job writes it,
    -- a failed check clears it); claim_job's warm placement reads it
    warm jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(warm) = 'array')
);

CREATE TABLE courier_benchmark_runs (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    workflow text NOT NULL,
    device text NOT NULL,
    host text NOT NULL DEFAULT '',
    comfyui_version text,
    torch_version text,
    repeats integer NOT NULL CHECK (repeats >= 1),
    warmup integer NOT NULL DEFAULT 0 CHECK (warmup >= 0),
    wall_s jsonb NOT NULL CHECK (jsonb_typeof(wall_s) = 'array'),  -- seconds per repeat
    stats jsonb NOT NULL DEFAULT '{}',  -- mean, median, p95...
    per_node jsonb NOT NULL DEFAULT '{}',
    peak_memory_bytes bigint,
    extra jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX courier_benchmark_runs_workflow_idx ON courier_benchmark_runs (workflow, created_at);

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
CREATE UNIQUE INDEX courier_pending_edit_idx ON courier_pending_actions (user_id, chat_id) WHERE action = 'edit';

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

-- Kept for hosts from before 0012 (they call it until they are upgraded): courier_take_quota_v1.
CREATE FUNCTION courier_take_quota(p_user bigint, p_per_hour integer, p_per_day integer) RETURNS text
LANGUAGE sql AS $$ SELECT courier_take_quota_v1(p_user, p_per_hour, p_per_day) $$;

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

-- Kept for hosts from before 0012 (they call it until they are upgraded): courier_submit_v1.
CREATE FUNCTION courier_submit(
    p_user_id bigint, p_username text, p_first_name text, p_language_code text,
    p_chat_id bigint, p_command text, p_params jsonb, p_max_attempts integer, p_reply_to_message_id bigint,
    p_max_active bigint, p_per_hour integer, p_per_day integer, p_bot_id bigint, p_update_id bigint,
    p_part integer, OUT job_id bigint, OUT active bigint, OUT spent text, OUT duplicate boolean)
LANGUAGE sql AS $$
    SELECT * FROM courier_submit_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
$$;

CREATE TABLE courier_polled_updates (
    bot_id bigint NOT NULL,  -- Telegram id of the bot the update came to
    update_id bigint NOT NULL,
    payload text NOT NULL,  -- the update's JSON (not jsonb, which refuses the \u0000 a message may hold)
    received_at timestamptz NOT NULL DEFAULT now(),
    handled_at timestamptz,  -- NULL: its handlers have not finished yet
    PRIMARY KEY (bot_id, update_id)
);
CREATE INDEX courier_polled_updates_unhandled ON courier_polled_updates (bot_id, update_id)
    WHERE handled_at IS NULL;

CREATE TABLE courier_webhook_secrets (
    bot_id bigint PRIMARY KEY,  -- Telegram id of the bot
    secret text NOT NULL,  -- 1-256 of A-Z a-z 0-9 _ - (Telegram's rule for secret_token)
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_owner_codes (
    code_hash bytea PRIMARY KEY,  -- sha256 of a one-time owner code (128 random bits)
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Editor-proof nonces spent (editor_proof.py): a proof sends once on every backend of the database
-- and across restarts. One row per Telegram Output node a proof approved, kept until no backend
-- could still approve or run a copy of the proof (spend_editor_nonce drops expired rows).
CREATE TABLE courier_editor_nonces (
    nonce text NOT NULL,  -- the proof's nonce, 16-64 characters the editor chose at random
    node_id text NOT NULL,  -- the Telegram Output node that spent it
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (nonce, node_id)
);
CREATE INDEX courier_editor_nonces_expires ON courier_editor_nonces (expires_at);

CREATE TABLE courier_result_buttons (
    token text PRIMARY KEY,  -- the random part of the callback data of a job's buttons
    job_id bigint NOT NULL UNIQUE REFERENCES courier_jobs ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_button_presses (
    token text NOT NULL REFERENCES courier_result_buttons ON DELETE CASCADE,
    action text NOT NULL,  -- seed, upscale, again: a press that queued a job
    pressed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (token, action)
);

-- A chat's queue message: its message id (NULL while it is being posted), the text it shows, and
-- until when a host is sending it (posting or editing; nobody else may take it meanwhile).
CREATE TABLE courier_queue_messages (
    chat_id bigint PRIMARY KEY,
    message_id bigint,
    shown text,
    busy_until timestamptz
);

CREATE INDEX courier_jobs_chat_queued_idx ON courier_jobs (chat_id) WHERE status = 'queued';
CREATE INDEX courier_jobs_succeeded_idx ON courier_jobs (finished_at) WHERE status = 'succeeded';

-- Which message worker p_worker shows job p_job's status in, decided before anything is posted:
-- 'edit' (message: the job's own, or the chat's queue message, handed over once the chat has no
-- queued job left), 'wait' (the queue message is being sent: ask again), 'post' (post one, then
-- record it) or 'none' (the job is not this worker's: show nothing).
CREATE FUNCTION courier_take_status_v1(p_job bigint, p_worker text)
RETURNS TABLE (decision text, message bigint)
LANGUAGE plpgsql AS $$
DECLARE
    job_chat bigint;
    job_worker text;
    job_message bigint;
    queue_message bigint;
    queue_busy boolean;
BEGIN
    SELECT j.chat_id, j.worker, j.status_message_id INTO job_chat, job_worker, job_message
    FROM courier_jobs j WHERE j.id = p_job FOR UPDATE;
    IF NOT FOUND OR job_worker IS DISTINCT FROM p_worker THEN
        RETURN QUERY SELECT 'none'::text, NULL::bigint;
        RETURN;
    END IF;
    IF job_message IS NOT NULL THEN
        RETURN QUERY SELECT 'edit'::text, job_message;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM courier_jobs q WHERE q.chat_id = job_chat AND q.status = 'queued') THEN
        SELECT m.message_id, coalesce(m.busy_until > now(), false) INTO queue_message, queue_busy
        FROM courier_queue_messages m WHERE m.chat_id = job_chat FOR UPDATE;
        IF FOUND AND queue_busy THEN
            RETURN QUERY SELECT 'wait'::text, NULL::bigint;
            RETURN;
        END IF;
        IF queue_message IS NOT NULL THEN
            DELETE FROM courier_queue_messages m WHERE m.chat_id = job_chat;
            UPDATE courier_jobs j SET status_message_id = queue_message WHERE j.id = p_job;
            RETURN QUERY SELECT 'edit'::text, queue_message;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT 'post'::text, NULL::bigint;
END
$$;

CREATE TABLE courier_send_bots (
    bot_key bytea PRIMARY KEY  -- sha256 of the bot token (never the token); its row is the ledger's lock
);

CREATE TABLE courier_send_slots (
    bot_key bytea NOT NULL REFERENCES courier_send_bots ON DELETE CASCADE,
    id bigint GENERATED ALWAYS AS IDENTITY,
    answered boolean NOT NULL DEFAULT false,  -- false: the message is on its way
    held_until timestamptz NOT NULL,  -- on its way: the grant plus the longest a request takes; answered: the answer plus the period
    PRIMARY KEY (bot_key, id)
);

-- The ledger of bot p_bot_key (a hash of its token): a slot is held from its grant until p_period_ms
-- after its message was answered, as the host's own window holds it (bot/windows.py), so no
-- p_period_ms at Telegram's end see more than p_limit messages from all hosts together.
-- First the host's answered slots (p_answered, answered p_answered_ago_ms ago; a slot never reported
-- is let go p_open_ms after its grant: its host died); then up to p_wanted new slots. When fewer
-- were granted, wait_ms says when to ask again: when the first answered slot leaves the window, or
-- after p_poll_ms while slots are on their way (their answers come in the hosts' next calls). The
-- bot's row is locked first and the time read after, so the hosts' calls are one after the other.
CREATE FUNCTION courier_take_send_slots_v1(
    p_bot_key bytea, p_wanted integer, p_limit integer, p_period_ms integer, p_open_ms integer, p_poll_ms integer,
    p_answered bigint[], p_answered_ago_ms integer[], OUT slots bigint[], OUT wait_ms integer)
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz;
    ms constant interval := interval '1 millisecond';
    held integer;
    first_free timestamptz;
    on_its_way boolean;
BEGIN
    INSERT INTO courier_send_bots (bot_key) VALUES (p_bot_key)
    ON CONFLICT (bot_key) DO UPDATE SET bot_key = EXCLUDED.bot_key;
    at := clock_timestamp();
    UPDATE courier_send_slots s SET answered = true, held_until = at - a.ago * ms + p_period_ms * ms
    FROM unnest(p_answered, p_answered_ago_ms) AS a(id, ago)
    WHERE s.bot_key = p_bot_key AND s.id = a.id;
    DELETE FROM courier_send_slots WHERE bot_key = p_bot_key AND held_until <= at;
    SELECT count(*), min(held_until) FILTER (WHERE answered), coalesce(bool_or(NOT answered), false)
    INTO held, first_free, on_its_way
    FROM courier_send_slots WHERE bot_key = p_bot_key;
    WITH granted AS (
        INSERT INTO courier_send_slots (bot_key, held_until)
        SELECT p_bot_key, at + p_open_ms * ms FROM generate_series(1, greatest(0, least(p_wanted, p_limit - held)))
        RETURNING id
    )
    SELECT coalesce(array_agg(id), '{}') INTO slots FROM granted;
    wait_ms := CASE WHEN cardinality(slots) < p_wanted
                    THEN greatest(1, least(ceil(extract(epoch FROM first_free - at) * 1000)::integer,
                                           CASE WHEN on_its_way THEN p_poll_ms END))
                    ELSE 0 END;
END
$$;

-- Who may use the bot, asked for every update (the query admit_users calls it for many at once; see
-- migrations/0016_admit_function.sql).
CREATE FUNCTION courier_admit_v1(p_user bigint, p_username text, p_ids bigint[], p_names text[], p_everyone boolean,
                                 OUT banned boolean, OUT language text, OUT allowed boolean, OUT admin boolean,
                                 OUT owner_wanted boolean)
LANGUAGE sql AS $$
WITH known AS (
    SELECT banned, language, allowed, is_admin FROM courier_users WHERE user_id = p_user
), bound AS (
    INSERT INTO courier_allowed_names (username, user_id)
    SELECT p_username, p_user WHERE p_username = ANY(p_names)
    ON CONFLICT (username) DO NOTHING
    RETURNING user_id
), verdict AS (
    SELECT coalesce((SELECT banned FROM known), false) AS banned,
           (SELECT language FROM known) AS language,
           coalesce((SELECT is_admin FROM known), false) AS admin,
           (p_everyone OR p_user = ANY(p_ids)
            OR coalesce((SELECT allowed FROM known), false)
            OR EXISTS (SELECT 1 FROM bound)
            OR EXISTS (SELECT 1 FROM courier_allowed_names a WHERE a.user_id = p_user AND a.username = ANY(p_names)))
               AS allowed,
           EXISTS (SELECT 1 FROM courier_owner_codes) AS owner_wanted
), named AS (
    INSERT INTO courier_users (user_id, username)
    SELECT p_user, p_username FROM verdict
    WHERE (verdict.allowed OR verdict.admin)
      AND NOT EXISTS (SELECT 1 FROM courier_users u WHERE u.user_id = p_user AND u.username IS NOT DISTINCT FROM p_username)
    ON CONFLICT (user_id) DO UPDATE SET username = EXCLUDED.username
    WHERE courier_users.username IS DISTINCT FROM EXCLUDED.username
    RETURNING user_id
), renamed AS (
    UPDATE courier_users SET username = NULL
    WHERE p_username IS NOT NULL AND lower(username) = p_username AND user_id <> p_user
      AND EXISTS (SELECT 1 FROM named)
)
SELECT banned, language, allowed, admin, owner_wanted FROM verdict
$$;

-- When queued jobs start, from each command's own recent run times (hold_queue_message, list_queue).
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
