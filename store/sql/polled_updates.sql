-- The named queries of store/polled_updates.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- keep_polled_updates --
-- $2, $3: the update ids and their JSON; returns the ids of those not kept before.
INSERT INTO courier_polled_updates (bot_id, update_id, payload)
SELECT $1, t.update_id, t.payload FROM unnest($2::bigint[], $3::text[]) AS t (update_id, payload)
ON CONFLICT DO NOTHING
RETURNING update_id;

-- unhandled_polled_updates --
SELECT update_id, payload FROM courier_polled_updates
WHERE bot_id = $1 AND handled_at IS NULL ORDER BY update_id;

-- polled_updates_handled --
-- The payload goes: only the ids are needed to know the update again, and no sender's profile
-- or text (an owner code, a refused stranger's message) stays for the day the row does.
UPDATE courier_polled_updates SET handled_at = now(), payload = '' WHERE bot_id = $1 AND update_id = ANY($2::bigint[]);

-- forget_old_polled_updates --
DELETE FROM courier_polled_updates WHERE handled_at < now() - interval '1 day';
