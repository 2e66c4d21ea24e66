-- Editor-proof nonces spent (editor_proof.py): a proof sends once on every backend of the database
-- and across restarts; the gate's memory sees only its own process. One row per Telegram Output
-- node a proof approved (one proof covers every such node of its graph), kept until no backend
-- could still approve or run a copy of the proof (the query spend_editor_nonce drops expired rows).
CREATE TABLE courier_editor_nonces (
    nonce text NOT NULL,  -- the proof's nonce, 16-64 characters the editor chose at random
    node_id text NOT NULL,  -- the Telegram Output node that spent it
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (nonce, node_id)
);
CREATE INDEX courier_editor_nonces_expires ON courier_editor_nonces (expires_at);
