-- One row per output of a job that was or is being sent to the chat, written before the send
-- ('sending') and completed after it ('sent', with what the chat answered). A re-run of the
-- job sends none of its outputs that have a row: 'sent' is delivered, and 'sending' is an
-- outcome nobody knows (the answer was lost, or the process died), where sending again could
-- duplicate it. A send that failed for sure deletes its row.
CREATE TABLE courier_deliveries (
    job_id bigint NOT NULL REFERENCES courier_jobs ON DELETE CASCADE,
    output text NOT NULL,  -- "<node id>:<index>", the same in every run of the job
    status text NOT NULL CHECK (status IN ('sending', 'sent')),
    record jsonb,  -- what the chat answered (file id, message ids), once sent
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, output)
);
