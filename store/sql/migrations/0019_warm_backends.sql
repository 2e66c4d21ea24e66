-- What each backend holds (issue 31, warm placement): the model files of the last job claimed on it,
-- written by claim_job; ComfyUI keeps the last graph's loaded models, so its next job of those files
-- loads nothing (a job of no model file leaves none held). A failed health check clears it (the
-- backend may have restarted).
ALTER TABLE courier_backends
    ADD COLUMN warm jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(warm) = 'array');
