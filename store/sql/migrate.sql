-- The named queries of store/migrate.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- lock_migrations --
-- Serializes migrators until their transaction ends.
SELECT pg_advisory_xact_lock(hashtext('courier_migrations'));

-- create_migrations_table --
CREATE TABLE IF NOT EXISTS courier_migrations (
    name text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- applied_migrations --
SELECT name FROM courier_migrations ORDER BY name;

-- record_migration --
INSERT INTO courier_migrations (name) VALUES ($1);
