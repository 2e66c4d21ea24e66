-- A user's default options (/settings), applied under the options typed in a command.

CREATE TABLE courier_user_options (
    user_id bigint PRIMARY KEY REFERENCES courier_users ON DELETE CASCADE,
    options text NOT NULL,  -- as the user would type them: "--ar 16:9 --steps 4"
    updated_at timestamptz NOT NULL DEFAULT now()
);
