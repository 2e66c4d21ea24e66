-- The named queries of store/user_options.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- ensure_user --
INSERT INTO courier_users (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING;

-- get_user_options --
SELECT options FROM courier_user_options WHERE user_id = $1;

-- set_user_options --
INSERT INTO courier_user_options (user_id, options) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET options = EXCLUDED.options, updated_at = now();

-- clear_user_options --
DELETE FROM courier_user_options WHERE user_id = $1;
