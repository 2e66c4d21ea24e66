-- The named queries of store/webhook_secrets.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- webhook_secret --
-- The webhook secret of bot $1: $2 for a bot that has none yet, else the one it has (a host that
-- races another one's insert waits for it and gets its secret).
INSERT INTO courier_webhook_secrets (bot_id, secret) VALUES ($1, $2)
ON CONFLICT (bot_id) DO UPDATE SET bot_id = EXCLUDED.bot_id
RETURNING secret;
