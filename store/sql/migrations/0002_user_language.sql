-- The language a user chose with /lang (a catalog: en, de, ru, zh, ja, tr); NULL: their Telegram language.

ALTER TABLE courier_users ADD COLUMN language text;
