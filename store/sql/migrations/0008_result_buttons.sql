-- Buttons under results and /history (issue 12, steps 2, 3 and 9). A button's callback data names
-- an action and a random token, never a job id: the token is looked up here, with its job and so
-- its user. A press of a button that queues a job is recorded once per token and action, so a
-- second press (even one processed at the same time) queues nothing. The pending "send the
-- instruction" step of the edit button is a courier_pending_actions row: one per user and chat.
CREATE TABLE courier_result_buttons (
    token text PRIMARY KEY,  -- the random part of the callback data of a job's buttons
    job_id bigint NOT NULL UNIQUE REFERENCES courier_jobs ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE courier_button_presses (
    token text NOT NULL REFERENCES courier_result_buttons ON DELETE CASCADE,
    action text NOT NULL,  -- seed, upscale, again
    pressed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (token, action)
);

CREATE UNIQUE INDEX courier_pending_edit_idx ON courier_pending_actions (user_id, chat_id) WHERE action = 'edit';
