-- Private by default (issue 17, item 7): users an admin let in with /allow, and the one-time
-- owner codes that make the first admin while the bot has none.

ALTER TABLE courier_users ADD COLUMN allowed boolean NOT NULL DEFAULT false;  -- /allow; survives /forget

-- Every host that starts the bot while it has no admin adds a code and prints it once; any of
-- them makes the first admin (/start <code>), which spends them all. Only a hash is kept.
CREATE TABLE courier_owner_codes (
    code_hash bytea PRIMARY KEY,  -- sha256 of the code (128 random bits)
    created_at timestamptz NOT NULL DEFAULT now()
);
