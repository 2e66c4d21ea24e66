-- The named queries of store/inline.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- inline_results --
-- Inline mode: the files of user $1's jobs that reached the chat (courier_deliveries 'sent', from the
-- moment Telegram took each), newest job first, $3 of them from position $4. A job is listed when
-- each of the words $2 is in its command line (command, prompt, options; any case) or is the token
-- of its result buttons (what a result's 📤 Share button types). Another user's jobs never: they are
-- not asked for. Jobs /forget or 🗑 deleted are gone with their rows.
SELECT j.id AS job_id, j.command, coalesce(j.params->>'prompt', '') AS prompt,
       row_number() OVER (PARTITION BY j.id ORDER BY d.output) AS position, d.record AS output
FROM courier_jobs j
JOIN courier_deliveries d ON d.job_id = j.id AND d.status = 'sent' AND jsonb_typeof(d.record->'file_id') = 'string'
LEFT JOIN courier_result_buttons b ON b.job_id = j.id
WHERE j.user_id = $1
  AND NOT EXISTS (
      SELECT 1 FROM unnest($2::text[]) AS w(word)
      WHERE strpos(lower(j.command || ' ' || coalesce(j.params->>'prompt', '') || ' '
                         || coalesce(j.params->>'options', '')), lower(w.word)) = 0
        AND w.word IS DISTINCT FROM b.token)
ORDER BY j.id DESC, position
LIMIT $3 OFFSET $4;
