-- Who may use the bot, asked for every update, as a function (it was the query admit_user), so
-- that one statement admits the senders of many updates at once (the query admit_users).
-- p_user the user, p_username their @username (lower case, no @; NULL if none), p_ids the ids the
-- settings let in (the admins' among them), p_names the allowed usernames, p_everyone whether the
-- settings let everyone in (*). Let in besides them: whoever /allow or an owner code let in
-- (allowed, is_admin). An allowed username is bound to the first id that comes with it; later
-- owners of that name are not let in by it. Only a user let in has a row written: a refused
-- stranger leaves none. The row keeps their current username, which leaves any other row that
-- still had it (a name passes on). A known user whose username is unchanged writes nothing.
-- owner_wanted: owner codes are pending (the bot has no admin in PostgreSQL yet).
CREATE FUNCTION courier_admit_v1(p_user bigint, p_username text, p_ids bigint[], p_names text[], p_everyone boolean,
                                 OUT banned boolean, OUT language text, OUT allowed boolean, OUT admin boolean,
                                 OUT owner_wanted boolean)
LANGUAGE sql AS $$
WITH known AS (
    SELECT banned, language, allowed, is_admin FROM courier_users WHERE user_id = p_user
), bound AS (
    INSERT INTO courier_allowed_names (username, user_id)
    SELECT p_username, p_user WHERE p_username = ANY(p_names)
    ON CONFLICT (username) DO NOTHING
    RETURNING user_id
), verdict AS (
    SELECT coalesce((SELECT banned FROM known), false) AS banned,
           (SELECT language FROM known) AS language,
           coalesce((SELECT is_admin FROM known), false) AS admin,
           (p_everyone OR p_user = ANY(p_ids)
            OR coalesce((SELECT allowed FROM known), false)
            OR EXISTS (SELECT 1 FROM bound)
            OR EXISTS (SELECT 1 FROM courier_allowed_names a WHERE a.user_id = p_user AND a.username = ANY(p_names)))
               AS allowed,
           EXISTS (SELECT 1 FROM courier_owner_codes) AS owner_wanted
), named AS (
    INSERT INTO courier_users (user_id, username)
    SELECT p_user, p_username FROM verdict
    WHERE (verdict.allowed OR verdict.admin)
      AND NOT EXISTS (SELECT 1 FROM courier_users u WHERE u.user_id = p_user AND u.username IS NOT DISTINCT FROM p_username)
    ON CONFLICT (user_id) DO UPDATE SET username = EXCLUDED.username
    WHERE courier_users.username IS DISTINCT FROM EXCLUDED.username
    RETURNING user_id
), renamed AS (
    UPDATE courier_users SET username = NULL
    WHERE p_username IS NOT NULL AND lower(username) = p_username AND user_id <> p_user
      AND EXISTS (SELECT 1 FROM named)
)
SELECT banned, language, allowed, admin, owner_wanted FROM verdict
$$;
