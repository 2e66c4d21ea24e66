-- The named queries of store/commands.py, loaded by store/db.py (Queries): query("name") there.
-- Each starts with a `-- name --` line and runs until the next one: keep comments inside a
-- query, below its name.

-- put_command --
-- Creates or replaces a command; its enabled flag is kept on replace.
INSERT INTO courier_commands (name, description, workflow, owner, source)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO UPDATE
SET description = EXCLUDED.description,
    workflow = EXCLUDED.workflow,
    owner = EXCLUDED.owner,
    source = EXCLUDED.source,
    updated_at = now()
RETURNING *;

-- seed_command --
-- Adds a shipped command, or refreshes one that is still the shipped version; published
-- commands of the same name win.
INSERT INTO courier_commands (name, description, workflow, owner, source)
VALUES ($1, $2, $3, $4, 'seed')
ON CONFLICT (name) DO UPDATE
SET description = EXCLUDED.description, workflow = EXCLUDED.workflow, updated_at = now()
WHERE courier_commands.source = 'seed'
    AND (courier_commands.description, courier_commands.workflow)
        IS DISTINCT FROM (EXCLUDED.description, EXCLUDED.workflow)
RETURNING *;

-- get_command --
SELECT * FROM courier_commands WHERE name = $1;

-- get_command_for_user --
-- Command $1 (its columns NULL if there is none) and user $2's default options (NULL: none), as
-- admit_users gives them for the command an update names.
SELECT c.*, (SELECT options FROM courier_user_options WHERE user_id = $2) AS user_options
FROM (SELECT 1) AS one LEFT JOIN courier_commands c ON c.name = $1;

-- set_command_defaults --
-- The options an admin set for command $1 ("" clears them); NULL if there is no such command.
UPDATE courier_commands SET defaults = $2 WHERE name = $1 RETURNING defaults;

-- list_commands --
SELECT * FROM courier_commands WHERE enabled OR NOT $1 ORDER BY name;

-- command_node_types --
-- The node types of every command's graph (enabled or not): what the gateway lets a bot queue.
SELECT DISTINCT node->>'class_type' AS class_type
FROM courier_commands, jsonb_each(workflow) AS n(id, node)
WHERE jsonb_typeof(node) = 'object' AND node ? 'class_type';

-- set_command_enabled --
UPDATE courier_commands SET enabled = $2, updated_at = now() WHERE name = $1 RETURNING *;

-- delete_command --
DELETE FROM courier_commands WHERE name = $1 RETURNING name;
