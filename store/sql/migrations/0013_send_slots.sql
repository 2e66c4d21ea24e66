-- Telegram's limit of 30 messages in any second is per bot token, for every host that sends with it:
-- the hosts take their slots from one sliding-window ledger per bot (bot/fleet.py).

CREATE TABLE courier_send_bots (
    bot_key bytea PRIMARY KEY  -- sha256 of the bot token (never the token); its row is the ledger's lock
);

CREATE TABLE courier_send_slots (
    bot_key bytea NOT NULL REFERENCES courier_send_bots ON DELETE CASCADE,
    id bigint GENERATED ALWAYS AS IDENTITY,
    answered boolean NOT NULL DEFAULT false,  -- false: the message is on its way
    held_until timestamptz NOT NULL,  -- on its way: the grant plus the longest a request takes; answered: the answer plus the period
    PRIMARY KEY (bot_key, id)
);

-- The ledger of bot p_bot_key (a hash of its token): a slot is held from its grant until p_period_ms
-- after its message was answered, as the host's own window holds it (bot/windows.py), so no
-- p_period_ms at Telegram's end see more than p_limit messages from all hosts together.
-- First the host's answered slots (p_answered, answered p_answered_ago_ms ago; a slot never reported
-- is let go p_open_ms after its grant: its host died); then up to p_wanted new slots. When fewer
-- were granted, wait_ms says when to ask again: when the first answered slot leaves the window, or
-- after p_poll_ms while slots are on their way (their answers come in the hosts' next calls). The
-- bot's row is locked first and the time read after, so the hosts' calls are one after the other.
CREATE FUNCTION courier_take_send_slots_v1(
    p_bot_key bytea, p_wanted integer, p_limit integer, p_period_ms integer, p_open_ms integer, p_poll_ms integer,
    p_answered bigint[], p_answered_ago_ms integer[], OUT slots bigint[], OUT wait_ms integer)
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz;
    ms constant interval := interval '1 millisecond';
    held integer;
    first_free timestamptz;
    on_its_way boolean;
BEGIN
    INSERT INTO courier_send_bots (bot_key) VALUES (p_bot_key)
    ON CONFLICT (bot_key) DO UPDATE SET bot_key = EXCLUDED.bot_key;
    at := clock_timestamp();
    UPDATE courier_send_slots s SET answered = true, held_until = at - a.ago * ms + p_period_ms * ms
    FROM unnest(p_answered, p_answered_ago_ms) AS a(id, ago)
    WHERE s.bot_key = p_bot_key AND s.id = a.id;
    DELETE FROM courier_send_slots WHERE bot_key = p_bot_key AND held_until <= at;
    SELECT count(*), min(held_until) FILTER (WHERE answered), coalesce(bool_or(NOT answered), false)
    INTO held, first_free, on_its_way
    FROM courier_send_slots WHERE bot_key = p_bot_key;
    WITH granted AS (
        INSERT INTO courier_send_slots (bot_key, held_until)
        SELECT p_bot_key, at + p_open_ms * ms FROM generate_series(1, greatest(0, least(p_wanted, p_limit - held)))
        RETURNING id
    )
    SELECT coalesce(array_agg(id), '{}') INTO slots FROM granted;
    wait_ms := CASE WHEN cardinality(slots) < p_wanted
                    THEN greatest(1, least(ceil(extract(epoch FROM first_free - at) * 1000)::integer,
                                           CASE WHEN on_its_way THEN p_poll_ms END))
                    ELSE 0 END;
END
$$;
