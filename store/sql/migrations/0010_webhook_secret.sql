-- The secret Telegram sends with each webhook update when the operator set none
-- (COURIER_WEBHOOK_SECRET): made by the first host that starts the bot in webhook mode, so every
-- host of the bot and every restart registers and checks the same one.
CREATE TABLE courier_webhook_secrets (
    bot_id bigint PRIMARY KEY,  -- Telegram id of the bot
    secret text NOT NULL,  -- 1-256 of A-Z a-z 0-9 _ - (Telegram's rule for secret_token)
    created_at timestamptz NOT NULL DEFAULT now()
);
