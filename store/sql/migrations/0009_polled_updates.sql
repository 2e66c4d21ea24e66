-- Updates fetched by long polling, kept from before Telegram is told they arrived (the next
-- getUpdates' offset) until their handlers ran: a bot killed in between handles them after its
-- restart, and an update polled again is not handled twice. Handled rows stay a day (Telegram
-- keeps an update 24 hours) so a second fetch of one is recognized.
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
