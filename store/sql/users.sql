-- The named queries of store/users.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- get_user --
SELECT * FROM courier_users WHERE user_id = $1;

-- set_language --
-- The user's /lang choice ($2; NULL: their Telegram language again), for a new user too.
INSERT INTO courier_users (user_id, language) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET language = EXCLUDED.language;
