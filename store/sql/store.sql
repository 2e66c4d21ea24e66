-- The named queries of store/__init__.py (Store), loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- ping --
SELECT 1;
