-- The message shape of a job (issue 19, items 1 and 2): one queue message per chat, listing the
-- chat's queued jobs (bot/queue_message.py), and a job's status message decided here before it is
-- posted (courier_take_status_v1), so that it is posted once, whichever host runs the job.

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
