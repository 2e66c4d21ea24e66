-- The named queries of store/backends.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- register_backend --
INSERT INTO courier_backends (url, capacity) VALUES ($1, $2)
ON CONFLICT (url) DO UPDATE SET url = EXCLUDED.url
RETURNING *;

-- list_backends --
-- Every backend with how many jobs run on it now; only those of urls $1 unless NULL.
SELECT b.*, (SELECT count(*) FROM courier_jobs j WHERE j.status = 'running' AND j.backend = b.url) AS running
FROM courier_backends b
WHERE $1::text[] IS NULL OR b.url = any($1::text[])
ORDER BY b.id;

-- record_check --
-- The outcome of a health check of backend $1: healthy (error $2 NULL, models $3 and their
-- kinds $4 unless NULL) or not, which clears what it holds (it may have restarted). Returns
-- whether it has recovered (was unhealthy, is healthy now).
UPDATE courier_backends b
SET healthy = $2::text IS NULL,
    last_error = $2,
    checked_at = now(),
    last_seen_at = CASE WHEN $2::text IS NULL THEN now() ELSE b.last_seen_at END,
    models = CASE WHEN $2::text IS NULL THEN coalesce($3, b.models) ELSE b.models END,
    model_kinds = CASE WHEN $2::text IS NULL THEN coalesce($4, b.model_kinds) ELSE b.model_kinds END,
    warm = CASE WHEN $2::text IS NULL THEN b.warm ELSE '[]' END
FROM courier_backends before
WHERE b.url = $1 AND before.id = b.id
RETURNING NOT before.healthy AND b.healthy AS recovered;

-- mark_stale_backends --
-- Backends that are not among urls $1 (this host's) and that no host has checked successfully for
-- $2 seconds (a ComfyUI of an earlier run): down, with error $3, so nothing is queued for them.
UPDATE courier_backends
SET healthy = false, last_error = $3, checked_at = now()
WHERE healthy AND NOT url = any($1::text[])
    AND coalesce(last_seen_at, created_at) < now() - make_interval(secs => $2)
RETURNING url;

-- set_backend --
-- Drains/undrains backend $1 (id) or sets its capacity; NULL leaves a value as it is.
UPDATE courier_backends
SET draining = coalesce($2, draining), capacity = coalesce($3, capacity)
WHERE id = $1
RETURNING *;
