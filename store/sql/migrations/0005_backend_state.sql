-- The backends table becomes the dispatcher's source of truth: how many prompts a host keeps on
-- a backend at once, whether it answered its last health check, whether it takes new jobs, and
-- the model files it has. The unused name and enabled columns go.
ALTER TABLE courier_backends
    DROP COLUMN name,
    DROP COLUMN enabled,
    ADD COLUMN capacity integer NOT NULL DEFAULT 1 CHECK (capacity >= 1),
    ADD COLUMN healthy boolean NOT NULL DEFAULT true,
    ADD COLUMN draining boolean NOT NULL DEFAULT false,
    ADD COLUMN models jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(models) = 'array'),
    ADD COLUMN checked_at timestamptz;

CREATE INDEX courier_jobs_backend_idx ON courier_jobs (backend) WHERE status = 'running';
