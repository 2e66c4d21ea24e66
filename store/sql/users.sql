-- The named queries of store/users.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- upsert_user --
INSERT INTO courier_users (user_id, username, first_name, language_code)
VALUES ($1, $2, $3, $4)
ON CONFLICT (user_id) DO UPDATE
SET username = EXCLUDED.username,
    first_name = EXCLUDED.first_name,
    language_code = EXCLUDED.language_code
RETURNING *;

-- get_user --
SELECT * FROM courier_users WHERE user_id = $1;

-- set_admin --
UPDATE courier_users SET is_admin = $2 WHERE user_id = $1 RETURNING *;

-- set_language --
-- The user's /lang choice ($2; NULL: their Telegram language again), for a new user too.
INSERT INTO courier_users (user_id, language) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET language = EXCLUDED.language;
