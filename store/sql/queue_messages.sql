-- The named queries of store/queue_messages.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- hold_queue_message --
-- One update of chat :chat_id's queue message, in one statement: hold the chat's row for :hold_s
-- seconds and read what the message is to show. :kept: this host holds the row since its last
-- update, which left message :message_id (NULL: none) showing :shown, recorded now; else the row is
-- claimed, unless another host holds it (then no row). Returns the message and text held, the
-- chat's queued jobs (at most :limit, as arrays in claim order) with their places and when they
-- start (courier_queue_estimates_v1: from their commands' own run times; NULL: no estimate yet),
-- the prompts the backends taking jobs run at once, and whether a running job of the chat still
-- has no status message (it takes the queue message over once the chat's queue is empty).
--
-- The places are computed for the chat's jobs alone (courier_queue computes every queued job's,
-- against every user's turn: under a flood each update would cost queued jobs x users rows). A job
-- queued again after it ran (its backend died) has a status message of its own, which says so: it
-- is not listed (a "Queued" line would come after that later state), though it keeps its place.
WITH kept AS (
    UPDATE courier_queue_messages m
    SET message_id = :message_id, shown = :shown, busy_until = now() + make_interval(secs => :hold_s)
    WHERE :kept AND m.chat_id = :chat_id
    RETURNING m.message_id, m.shown
), claimed AS (
    INSERT INTO courier_queue_messages AS m (chat_id, busy_until)
    SELECT :chat_id, now() + make_interval(secs => :hold_s) WHERE NOT EXISTS (SELECT 1 FROM kept)
    ON CONFLICT (chat_id) DO UPDATE SET busy_until = EXCLUDED.busy_until
        WHERE m.busy_until IS NULL OR m.busy_until <= now()
    RETURNING m.message_id, m.shown
), held AS (
    SELECT * FROM kept UNION ALL SELECT * FROM claimed
), mine AS (
    SELECT j.id, j.command, j.params->>'language' AS language, j.reply_to_message_id
    FROM courier_jobs j
    WHERE j.chat_id = :chat_id AND j.status = 'queued' AND j.status_message_id IS NULL AND EXISTS (SELECT 1 FROM held)
), listed AS (
    SELECT m.id, m.command, m.language, m.reply_to_message_id, e.place AS position, e.starts_in_s
    FROM mine m
    JOIN courier_queue_estimates_v1(ARRAY(SELECT id FROM mine)) e ON e.job_id = m.id
    ORDER BY e.place
    LIMIT :limit
)
SELECT held.message_id, held.shown,
       ARRAY(SELECT l.id FROM listed l ORDER BY l.position) AS ids,
       ARRAY(SELECT l.command FROM listed l ORDER BY l.position) AS commands,
       ARRAY(SELECT l.language FROM listed l ORDER BY l.position) AS languages,
       ARRAY(SELECT l.reply_to_message_id FROM listed l ORDER BY l.position) AS reply_tos,
       ARRAY(SELECT l.position FROM listed l ORDER BY l.position) AS positions,
       ARRAY(SELECT l.starts_in_s FROM listed l ORDER BY l.position) AS starts_in_s,
       (SELECT coalesce(sum(capacity), 0) FROM courier_backends WHERE healthy AND NOT draining) AS slots,
       EXISTS (SELECT 1 FROM courier_jobs
               WHERE chat_id = :chat_id AND status = 'running' AND status_message_id IS NULL) AS taker
FROM held;

-- settle_queue_message --
-- Chat $1's queue message is message $2 showing text $3, and nobody is sending it.
UPDATE courier_queue_messages SET message_id = $2, shown = $3, busy_until = NULL WHERE chat_id = $1;

-- drop_queue_message --
-- Chat $1 has no queue message any more (none went, or it says something else now).
DELETE FROM courier_queue_messages WHERE chat_id = $1;

