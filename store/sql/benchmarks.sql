-- The named queries of store/benchmarks.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- insert_benchmark_run --
INSERT INTO courier_benchmark_runs (workflow, device, host, comfyui_version, torch_version,
                                    repeats, warmup, wall_s, stats, per_node,
                                    peak_memory_bytes, extra)
VALUES (:workflow, :device, :host, :comfyui_version, :torch_version, :repeats, :warmup, :wall_s, :stats, :per_node,
        :peak_memory_bytes, :extra)
RETURNING *;

-- get_benchmark_run --
SELECT * FROM courier_benchmark_runs WHERE id = $1;

-- list_benchmark_runs --
-- Newest first; $1 filters by workflow unless NULL.
SELECT * FROM courier_benchmark_runs
WHERE $1::text IS NULL OR workflow = $1
ORDER BY created_at DESC, id DESC
LIMIT $2;
