-- The named queries of store/editor_nonces.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- spend_editor_nonce --
-- Whether editor-proof nonce $1 is spent now by Telegram Output node $2 (NULL: it was before, on any
-- host of the database); kept until $3 (epoch seconds). Expired nonces are dropped on the way.
WITH expired AS (
    DELETE FROM courier_editor_nonces WHERE expires_at < now()
)
INSERT INTO courier_editor_nonces (nonce, node_id, expires_at) VALUES ($1, $2, to_timestamp($3))
ON CONFLICT (nonce, node_id) DO NOTHING
RETURNING true;
