-- /img and /models: each backend's model files by kind (a checkpoint where a node's ckpt_name
-- offers it, a LoRA where a lora_name does), and the options an admin sets as a command's
-- defaults (kept as the text one would type, "--model sdxl --steps 30"; under each user's own).
ALTER TABLE courier_backends
    ADD COLUMN model_kinds jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(model_kinds) = 'object');

ALTER TABLE courier_commands
    ADD COLUMN defaults text NOT NULL DEFAULT '';
