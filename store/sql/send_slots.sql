-- The named queries of store/send_slots.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- take_send_slots --
-- Reports the answered slots $7 (answered $8 ms ago) of bot $1 (sha256 of its token), then takes up to
-- $2 of the $3 slots in any $4 ms; see courier_take_send_slots_v1.
SELECT slots, wait_ms FROM courier_take_send_slots_v1($1, $2, $3, $4, $5, $6, $7, $8);
