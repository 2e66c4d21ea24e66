-- The named queries of store/access.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- admit_users --
-- Who may use the bot (courier_admit_v1), for the senders of several updates in one statement and
-- one transaction, in the order given: :users, their :usernames (lower case, no @; NULL: none),
-- the :commands each update names (NULL: none), one element per update; the :allowed_ids the
-- settings let in, the :allowed_names, and whether the settings let :everyone in, for all.
-- With a command come its row (its columns NULL if there is none) and the user's default options
-- (user_options): a command's update needs no other query before its job. One row per update, in order.
SELECT a.banned, a.language, a.allowed, a.admin, a.owner_wanted, c.*,
       (SELECT options FROM courier_user_options o WHERE o.user_id = r.user_id AND r.command IS NOT NULL)
           AS user_options
FROM unnest(:users::bigint[], :usernames::text[], :commands::text[]) WITH ORDINALITY AS r(user_id, username, command, n)
CROSS JOIN LATERAL courier_admit_v1(r.user_id, r.username, :allowed_ids::bigint[], :allowed_names::text[], :everyone) AS a
LEFT JOIN courier_commands c ON c.name = r.command
ORDER BY r.n;

-- allow_user --
-- /allow: user $1 is let in, known or not yet.
INSERT INTO courier_users (user_id, allowed) VALUES ($1, true)
ON CONFLICT (user_id) DO UPDATE SET allowed = true;

-- disallow_user --
-- /disallow: user $1 is no longer let in by /allow; returns whether /allow had let them in.
UPDATE courier_users SET allowed = false WHERE user_id = $1 AND allowed RETURNING user_id;

-- may_receive --
-- Whether user $1 may be sent a render from the graph editor, by the same rules as courier_admit_v1
-- ($2 the ids the settings let in, the admins' among them, $3 the allowed usernames, $4 everyone)
-- but read-only: no username is bound, no row written. An admin made in PostgreSQL may; a banned
-- user may not; anyone else if the settings, /allow or an allowed username bound to them let them
-- in. COURIER_ADMIN_USERS are never banned: the caller lets them in without asking.
WITH known AS (
    SELECT banned, allowed, is_admin FROM courier_users WHERE user_id = $1
)
SELECT coalesce((SELECT is_admin FROM known), false)
       OR (NOT coalesce((SELECT banned FROM known), false)
           AND ($4 OR $1 = ANY($2::bigint[])
                OR coalesce((SELECT allowed FROM known), false)
                OR EXISTS (SELECT 1 FROM courier_allowed_names WHERE user_id = $1 AND username = ANY($3::text[]))));

-- stored_admins --
-- The admins made in PostgreSQL (by an owner code), beside COURIER_ADMIN_USERS.
SELECT user_id FROM courier_users WHERE is_admin ORDER BY user_id;

-- add_owner_code --
-- Adds the hash $1 of a fresh owner code while the bot has no admin in PostgreSQL; returns it if added.
INSERT INTO courier_owner_codes (code_hash)
SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM courier_users WHERE is_admin)
RETURNING code_hash;

-- lock_owner_codes --
-- The pending owner codes' hashes, locked: a concurrent claim waits, then finds them spent.
SELECT code_hash FROM courier_owner_codes FOR UPDATE;

-- make_owner --
-- User $1 becomes an admin unless the bot has one in PostgreSQL already; every owner code is
-- spent either way. Returns the user's id if they were made one.
WITH spent AS (
    DELETE FROM courier_owner_codes
)
INSERT INTO courier_users (user_id, is_admin, allowed)
SELECT $1, true, true WHERE NOT EXISTS (SELECT 1 FROM courier_users WHERE is_admin)
ON CONFLICT (user_id) DO UPDATE SET is_admin = true, allowed = true, banned = false
RETURNING user_id;

-- user_by_username --
-- The id of the user last seen with @$1 (lower case, no @); none if nobody was.
SELECT user_id FROM courier_users WHERE lower(username) = $1;

-- set_banned --
-- Bans ($2 true) or unbans user $1, known or not yet.
INSERT INTO courier_users (user_id, banned) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET banned = EXCLUDED.banned
RETURNING banned;

-- quota_usage --
-- User $1's jobs counted in the last hour and day, and when the oldest of each leaves its window.
SELECT count(*) FILTER (WHERE at > now() - interval '1 hour') AS hour,
       count(*) AS day,
       min(at) FILTER (WHERE at > now() - interval '1 hour') + interval '1 hour' AS hour_frees_at,
       min(at) + interval '1 day' AS day_frees_at
FROM courier_quota_events
WHERE user_id = $1 AND at > now() - interval '1 day';

-- put_pending_action --
INSERT INTO courier_pending_actions (token, user_id, chat_id, action, payload, expires_at)
VALUES (:token, :user_id, :chat_id, :action, :payload, now() + make_interval(secs => :valid_s));

-- pending_action_user --
SELECT user_id FROM courier_pending_actions WHERE token = $1 AND expires_at > now();

-- take_pending_action --
-- The pending action behind a button, once, and only for the user it was made for, while valid.
DELETE FROM courier_pending_actions
WHERE token = $1 AND user_id = $2 AND action = $3 AND expires_at > now()
RETURNING *;
