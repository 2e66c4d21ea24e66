-- The named queries of store/send_slots.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- take_send_slots --
-- Reports the answered slots :answered (answered :answered_ago_ms ms ago) of bot :bot_key (sha256 of
-- its token), then takes up to :wanted of the :limit slots in any :period_ms ms; see
-- courier_take_send_slots_v1.
SELECT slots, wait_ms
FROM courier_take_send_slots_v1(:bot_key, :wanted, :limit, :period_ms, :open_ms, :poll_ms, :answered, :answered_ago_ms);
