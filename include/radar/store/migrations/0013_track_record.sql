-- Issue 25: the track record. Every pushed opportunity and every top pick of a daily report is followed in the
-- market: one pick per real-world event (its event_id), the instrument its targets name, the first price a
-- reader could have traded at after the push, and the return at 1, 5 and 20 trading days against a benchmark.
-- Prices come from a market-data library (include/radar/market/) and are cached here: one fetch per instrument
-- and day, whatever the number of picks.

-- Daily bars, backward-adjusted (hfq: a later dividend does not rewrite them), as the source returned them.
CREATE TABLE market_bar (
    instrument  text NOT NULL,               -- 'SH:600519', 'SZ:399006', 'HK:00700', 'HKI:HSI', 'SW:801081'
    day         date NOT NULL,
    open        double precision,
    high        double precision,
    low         double precision,
    close       double precision NOT NULL,
    PRIMARY KEY (instrument, day)
);

-- Intraday 5-minute bars of one instrument and day (a pick pushed during trading hours), as one JSON list.
CREATE TABLE market_intraday (
    instrument  text NOT NULL,
    day         date NOT NULL,
    bars        jsonb NOT NULL,              -- [[start 'HH:MM', open], ...]; [] when the source had none
    fetched_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instrument, day)
);

-- Trading days per market ('CN': the library's exchange calendar; 'HK': the days the Hang Seng traded).
CREATE TABLE market_calendar (
    market      text NOT NULL,
    day         date NOT NULL,
    PRIMARY KEY (market, day)
);

-- Listed names, to resolve a company named without its code (only when the name is unambiguous).
CREATE TABLE market_listing (
    instrument  text PRIMARY KEY,
    name        text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX market_listing_name_idx ON market_listing (name);

-- One row per thing fetched (an instrument's daily bars, the calendar, the listings) and Shanghai day: a
-- successful fetch is not repeated that day; a failed one is retried by the next day's run.
CREATE TABLE market_fetch (
    what        text NOT NULL,               -- 'daily:SH:600519', 'calendar:CN', 'listings'
    fetched_on  date NOT NULL,
    ok          boolean NOT NULL,
    rows        integer NOT NULL DEFAULT 0,
    error       text,
    attempts    integer NOT NULL DEFAULT 1,
    fetched_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (what, fetched_on)
);

-- One pick per real-world event (one event is one pick, however many accounts wrote it up), recorded the first
-- time the step sees it pushed or among a daily report's top picks. picked_at is when a reader could first
-- have acted on it (the push's send time), never earlier. status: measurable (an instrument was resolved),
-- unmeasurable (why in reason), unresolved (the name list could not be had yet: retried).
CREATE TABLE track_pick (
    id              bigserial PRIMARY KEY,
    event_id        bigint NOT NULL REFERENCES analysis_result (id) ON DELETE CASCADE,
    analysis_id     bigint NOT NULL REFERENCES analysis_result (id) ON DELETE CASCADE,
    origin          text NOT NULL CHECK (origin IN ('push', 'daily')),
    picked_at       timestamptz NOT NULL,
    pick_day        date NOT NULL,           -- the Shanghai day of picked_at
    score           smallint NOT NULL,
    direction       text NOT NULL,
    opp_type        text NOT NULL,
    account         text NOT NULL DEFAULT '',
    title           text NOT NULL DEFAULT '',
    target          text NOT NULL DEFAULT '',
    status          text NOT NULL CHECK (status IN ('measurable', 'unmeasurable', 'unresolved')),
    reason          text NOT NULL DEFAULT '',
    instrument      text,
    instrument_name text NOT NULL DEFAULT '',
    benchmark       text,
    benchmark_name  text NOT NULL DEFAULT '',
    -- the reference: the first price a reader could have traded at after picked_at
    ref_day         date,
    ref_kind        text CHECK (ref_kind IN ('open', 'intraday', 'close')),
    ref_price       double precision,
    bench_ref       double precision,
    ref_note        text NOT NULL DEFAULT '',
    limit_open      text CHECK (limit_open IN ('up', 'down')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT track_pick_event_key UNIQUE (event_id)
);
CREATE INDEX track_pick_day_idx ON track_pick (pick_day DESC, id DESC);
CREATE INDEX track_pick_analysis_idx ON track_pick (analysis_id);

-- The pick's outcome at 1, 5 and 20 trading days (keyed by pick and horizon: a rerun writes the same row).
-- status: waiting (the horizon's close is not published yet), measured, suspended (no trade that day: stated,
-- never filled in), no_data (the source had nothing for it).
CREATE TABLE track_outcome (
    pick_id     bigint NOT NULL REFERENCES track_pick (id) ON DELETE CASCADE,
    horizon     smallint NOT NULL CHECK (horizon IN (1, 5, 20)),
    status      text NOT NULL CHECK (status IN ('waiting', 'measured', 'suspended', 'no_data')),
    end_day     date,
    end_price   double precision,
    bench_end   double precision,
    ret         double precision,            -- the instrument's return from the reference
    bench_ret   double precision,
    excess      double precision,            -- ret - bench_ret
    signed_excess double precision,          -- excess in the call's direction (bearish: -excess); NULL: no direction
    hit         boolean,                     -- bullish and up, or bearish and down; NULL: no direction
    note        text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pick_id, horizon)
);
CREATE INDEX track_outcome_horizon_idx ON track_outcome (horizon, status);
