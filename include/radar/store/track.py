"""The track record's SQL: the market-data cache (bars, 5-minute bars, calendars, listed names, the fetch log),
the picks and their outcomes, and the read-only queries of the record's pages and of the rank."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from include.radar.core import redact
from include.radar.market import Bar, basis
from include.radar.market.outcomes import BANDS
from include.radar.store.common import PUSHED_ANALYSIS_ID, Row

# ------------------------------------------------------------------------------------------ the price cache


def fetched(conn: psycopg.Connection, what: str, day: date) -> Row | None:
    """The fetch of ``what`` made on ``day`` (Shanghai), if any: a successful one is not repeated that day."""
    return conn.execute("SELECT * FROM market_fetch WHERE what = %s AND fetched_on = %s", (what, day)).fetchone()


def record_fetch(conn: psycopg.Connection, what: str, day: date, at: datetime, *, ok: bool, rows: int = 0,
                 error: str | None = None) -> None:
    """``at``: the step's clock when it fetched (what the fetch could see: a bar published later was not in it)."""
    conn.execute(
        """
        INSERT INTO market_fetch (what, fetched_on, ok, rows, error, fetched_at) VALUES (%s, %s, %s, %s, %s, %s)
        ON CONFLICT (what, fetched_on) DO UPDATE SET ok = EXCLUDED.ok, rows = EXCLUDED.rows,
            error = EXCLUDED.error, attempts = market_fetch.attempts + 1, fetched_at = EXCLUDED.fetched_at
        """,
        (what, day, ok, rows, redact.scrub(error) if error else None, at),
    )


def fetch_attempts(conn: psycopg.Connection, whats: Sequence[str]) -> dict[str, tuple[int, date]]:
    """{what: (the days it was fetched on, the last of them)}: a fetch that never yields a bar backs off."""
    rows = conn.execute("SELECT what, count(*) AS n, max(fetched_on) AS last FROM market_fetch WHERE what = ANY(%s) "
                        "GROUP BY what", (list(whats),)).fetchall()
    return {r["what"]: (r["n"], r["last"]) for r in rows}


def last_bar_day(conn: psycopg.Connection, instrument: str) -> date | None:
    row = conn.execute("SELECT max(day) AS day FROM market_bar WHERE instrument = %s", (instrument,)).fetchone()
    return row["day"] if row else None


def save_bars(conn: psycopg.Connection, instrument: str, bars: Sequence[Bar]) -> int:
    if not bars:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO market_bar (instrument, day, open, high, low, close) VALUES (%s, %s, %s, %s, %s, %s)
            ON CONFLICT (instrument, day) DO UPDATE SET open = EXCLUDED.open, high = EXCLUDED.high,
                low = EXCLUDED.low, close = EXCLUDED.close
            """,
            [(instrument, b.day, b.open, b.high, b.low, b.close) for b in bars],
        )
    return len(bars)


def bars_of(conn: psycopg.Connection, instruments: Iterable[str], since: date) -> dict[str, dict[date, Bar]]:
    """{instrument: {day: bar}} from ``since`` on."""
    out: dict[str, dict[date, Bar]] = {}
    rows = conn.execute(
        "SELECT instrument, day, open, high, low, close FROM market_bar WHERE instrument = ANY(%s) AND day >= %s",
        (sorted(set(instruments)), since),
    ).fetchall()
    for r in rows:
        out.setdefault(r["instrument"], {})[r["day"]] = Bar(r["day"], r["open"], r["high"], r["low"], r["close"])
    return out


def save_calendar(conn: psycopg.Connection, market: str, days: Iterable[date]) -> int:
    days = sorted(set(days))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO market_calendar (market, day) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        [(market, d) for d in days])
    return len(days)


def calendar(conn: psycopg.Connection, market: str, since: date) -> list[date]:
    return [r["day"] for r in conn.execute(
        "SELECT day FROM market_calendar WHERE market = %s AND day >= %s ORDER BY day", (market, since)).fetchall()]


def save_intraday(conn: psycopg.Connection, instrument: str, day: date, bars: list[list[Any]]) -> None:
    conn.execute(
        """
        INSERT INTO market_intraday (instrument, day, bars) VALUES (%s, %s, %s)
        ON CONFLICT (instrument, day) DO UPDATE SET bars = EXCLUDED.bars, fetched_at = now()
        """,
        (instrument, day, Jsonb(bars)),
    )


def intraday_of(conn: psycopg.Connection, instrument: str, day: date) -> list[list[Any]] | None:
    row = conn.execute("SELECT bars FROM market_intraday WHERE instrument = %s AND day = %s",
                       (instrument, day)).fetchone()
    return row["bars"] if row else None


def save_listings(conn: psycopg.Connection, listings: Sequence[tuple[str, str]]) -> int:
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO market_listing (instrument, name) VALUES (%s, %s)
            ON CONFLICT (instrument) DO UPDATE SET name = EXCLUDED.name, updated_at = now()
            """,
            list(dict(listings).items()),
        )
    return len(listings)


def listings(conn: psycopg.Connection) -> list[tuple[str, str]]:
    return [(r["instrument"], r["name"]) for r in conn.execute("SELECT instrument, name FROM market_listing")]


def listed_names(conn: psycopg.Connection, instruments: Iterable[str]) -> dict[str, str]:
    """{instrument: its listed name} of the ones the listings hold."""
    rows = conn.execute("SELECT instrument, name FROM market_listing WHERE instrument = ANY(%s)",
                        (sorted(set(instruments)),)).fetchall()
    return {r["instrument"]: r["name"] for r in rows}


def listings_updated(conn: psycopg.Connection) -> datetime | None:
    return conn.execute("SELECT max(updated_at) AS at FROM market_listing").fetchone()["at"]


# ------------------------------------------------------------------------------------------------ picks


def new_picks(conn: psycopg.Connection) -> list[Row]:
    """Analyses a reader was shown as a pick whose event has no pick yet: every sent opportunity push (when it
    was first sent) and every top pick of a daily report (when the first daily push that showed it was sent,
    daily_push_pick; a report whose pushes predate that record: its first push; NULL when no push showed it:
    the step's own time stands in). The analysis's data come along."""
    return conn.execute(
        f"""
        WITH shown AS (
            SELECT {PUSHED_ANALYSIS_ID} AS analysis_id, 'push' AS origin, min(n.sent_at) AS shown_at
            FROM notification_log n
            WHERE n.push_type = 'opportunity' AND n.status = 1 AND n.sent_at IS NOT NULL
              AND n.target_url ~ '/analysis/[0-9]{{1,18}}$'
            GROUP BY 1
            UNION ALL
            SELECT (t.value ->> 'analysis_id')::bigint, 'daily',
                   CASE WHEN EXISTS (SELECT 1 FROM daily_push_pick l JOIN notification_log n ON n.id = l.notification_id
                                     WHERE n.report_date = r.report_date)
                   THEN (SELECT min(n.sent_at) FROM daily_push_pick l JOIN notification_log n ON n.id = l.notification_id
                         WHERE n.report_date = r.report_date AND n.status = 1
                           AND l.analysis_id = (t.value ->> 'analysis_id')::bigint)
                   ELSE (SELECT min(n.sent_at) FROM notification_log n
                         WHERE n.report_date = r.report_date AND n.push_type = 'daily' AND n.status = 1) END
            FROM daily_report r
            CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(r.digest_json -> 'top_opportunities')
                = 'array' THEN r.digest_json -> 'top_opportunities' ELSE '[]'::jsonb END) t
            WHERE jsonb_typeof(t.value -> 'analysis_id') = 'number'
              AND (t.value ->> 'analysis_id') ~ '^[0-9]{{1,18}}$'
        )
        SELECT s.analysis_id, s.origin, s.shown_at, coalesce(a.event_id, a.id) AS event_id, a.score, a.top_type,
               a.result_json, c.title, coalesce(acc.name, c.mp_id) AS mp_name
        FROM shown s
        JOIN analysis_result a ON a.id = s.analysis_id
        JOIN content_item c ON c.id = a.content_item_id
        LEFT JOIN wechat_account acc ON acc.id = c.account_id
        WHERE NOT EXISTS (SELECT 1 FROM track_pick p WHERE p.event_id = coalesce(a.event_id, a.id))
        ORDER BY s.shown_at NULLS LAST, s.analysis_id
        """
    ).fetchall()


def sent_daily_pushes(conn: psycopg.Connection, day: date) -> list[int]:
    """The notification ids of the daily pushes of ``day`` already sent."""
    rows = conn.execute("SELECT id FROM notification_log WHERE report_date = %s AND push_type = 'daily' AND status = 1",
                        (day,)).fetchall()
    return [r["id"] for r in rows]


def link_daily_push_picks(conn: psycopg.Connection, day: date, before: Sequence[int], analysis_ids: Sequence[int]
                          ) -> int:
    """Record that the daily pushes of ``day`` sent since ``before`` (sent_daily_pushes before the send) showed
    ``analysis_ids`` (the report's top picks as pushed): the track record dates a pick at the first of them."""
    if not analysis_ids:
        return 0
    return conn.execute(
        """
        INSERT INTO daily_push_pick (notification_id, analysis_id)
        SELECT n.id, a.id FROM notification_log n
        CROSS JOIN unnest(%s::bigint[]) AS picked(id) JOIN analysis_result a ON a.id = picked.id
        WHERE n.report_date = %s AND n.push_type = 'daily' AND n.status = 1 AND NOT n.id = ANY(%s::bigint[])
        ON CONFLICT DO NOTHING
        """,
        (sorted(set(analysis_ids)), day, list(before)),
    ).rowcount


PICK_COLUMNS = ("event_id", "analysis_id", "origin", "picked_at", "pick_day", "score", "direction", "opp_type",
                "account", "title", "target", "status", "reason", "instrument", "instrument_name", "benchmark",
                "benchmark_name")


def insert_pick(conn: psycopg.Connection, pick: dict[str, Any]) -> bool:
    """One pick per event: a second insert of the same event is a no-op (False)."""
    row = conn.execute(
        f"""
        INSERT INTO track_pick ({", ".join(PICK_COLUMNS)}) VALUES ({", ".join(f"%({c})s" for c in PICK_COLUMNS)})
        ON CONFLICT ON CONSTRAINT track_pick_event_key DO NOTHING RETURNING id
        """,
        pick,
    ).fetchone()
    return row is not None


def unresolved_picks(conn: psycopg.Connection) -> list[Row]:
    return conn.execute(
        """
        SELECT p.id, p.analysis_id, a.result_json FROM track_pick p JOIN analysis_result a ON a.id = p.analysis_id
        WHERE p.status = 'unresolved' ORDER BY p.id
        """
    ).fetchall()


def resolve_pick(conn: psycopg.Connection, pick_id: int, fields: dict[str, Any]) -> None:
    allowed = ("status", "reason", "target", "direction", "opp_type", "instrument", "instrument_name", "benchmark",
               "benchmark_name")
    sets = ", ".join(f"{k} = %({k})s" for k in allowed)
    conn.execute(f"UPDATE track_pick SET {sets}, updated_at = now() WHERE id = %(id)s AND status = 'unresolved'",
                 {**{k: fields.get(k) for k in allowed}, "id": pick_id})


def picks_to_recheck(conn: psycopg.Connection) -> list[Row]:
    """Measurable picks an older version of the pick rules could have got wrong: a stock against a Shenwan index
    (its sector may have come from its own name), or an index by its code (the name beside it was not checked)."""
    return conn.execute(
        """
        SELECT p.id, p.instrument, p.benchmark, a.result_json FROM track_pick p
        JOIN analysis_result a ON a.id = p.analysis_id
        WHERE p.status = 'measurable' AND (p.benchmark ~ '^SW:' AND p.instrument !~ '^SW:'
                                           OR p.instrument ~ '^(SH:000|SZ:399)')
        ORDER BY p.id
        """
    ).fetchall()


def redo_pick(conn: psycopg.Connection, pick_id: int, fields: dict[str, Any]) -> None:
    """A pick resolved again: its new fields, its reference and outcomes dropped (the step computes them again)."""
    allowed = ("status", "reason", "instrument", "instrument_name", "benchmark", "benchmark_name")
    sets = ", ".join(f"{k} = %({k})s" for k in allowed)
    conn.execute(f"UPDATE track_pick SET {sets}, ref_day = NULL, ref_kind = NULL, ref_price = NULL, bench_ref = NULL, "
                 "ref_note = '', limit_open = NULL, no_data_final = NULL, updated_at = now() WHERE id = %(id)s",
                 {**{k: fields.get(k) for k in allowed}, "id": pick_id})
    conn.execute("DELETE FROM track_outcome WHERE pick_id = %s", (pick_id,))


def open_picks(conn: psycopg.Connection) -> list[Row]:
    """Measurable picks with a horizon still to settle (waiting, no data, or not computed yet). A horizon is
    settled when measured, or suspended with its mark at the last close; a suspended one without a price only
    when the reference itself never traded (a row without its mark, as written before marks, is computed again).
    A pick whose missing data was declared final (no_data_final) is closed: its data is not asked for again."""
    return conn.execute(
        """
        SELECT p.* FROM track_pick p
        WHERE p.status = 'measurable' AND p.no_data_final IS NULL AND (
            SELECT count(*) FROM track_outcome o WHERE o.pick_id = p.id AND (o.status = 'measured'
                OR (o.status = 'suspended' AND (o.ret IS NOT NULL OR p.ref_price IS NULL)))
        ) < 3
        ORDER BY p.picked_at, p.id
        """
    ).fetchall()


def close_no_data(conn: psycopg.Connection, pick_id: int, day: date) -> None:
    """The pick's missing data is final from ``day``: no more fetches, its no-data horizons stay counted."""
    conn.execute("UPDATE track_pick SET no_data_final = %s, updated_at = now() WHERE id = %s AND no_data_final IS NULL",
                 (day, pick_id))


def save_reference(conn: psycopg.Connection, pick_id: int, ref: Any) -> None:
    conn.execute(
        """
        UPDATE track_pick SET ref_day = %s, ref_kind = %s, ref_price = %s, bench_ref = %s, ref_note = %s,
               limit_open = %s, updated_at = now()
        WHERE id = %s AND (ref_day IS DISTINCT FROM %s OR ref_kind IS DISTINCT FROM %s
                           OR ref_price IS DISTINCT FROM %s OR bench_ref IS DISTINCT FROM %s OR ref_note <> %s)
        """,
        (ref.day, ref.kind, ref.price, ref.bench, ref.note, ref.limit_open, pick_id,
         ref.day, ref.kind, ref.price, ref.bench, ref.note),
    )


def save_outcomes(conn: psycopg.Connection, pick_id: int, outcomes: Sequence[Any]) -> None:
    """Upsert the pick's outcome per horizon (keyed by pick and horizon); an unchanged row is left as it is."""
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO track_outcome (pick_id, horizon, status, end_day, end_price, bench_end, ret, bench_ret, excess,
                                       signed_excess, hit, note)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (pick_id, horizon) DO UPDATE SET status = EXCLUDED.status, end_day = EXCLUDED.end_day,
                end_price = EXCLUDED.end_price, bench_end = EXCLUDED.bench_end, ret = EXCLUDED.ret,
                bench_ret = EXCLUDED.bench_ret, excess = EXCLUDED.excess, signed_excess = EXCLUDED.signed_excess,
                hit = EXCLUDED.hit, note = EXCLUDED.note, updated_at = now()
            WHERE (track_outcome.status, track_outcome.end_day, track_outcome.ret, track_outcome.excess,
                   track_outcome.note) IS DISTINCT FROM
                  (EXCLUDED.status, EXCLUDED.end_day, EXCLUDED.ret, EXCLUDED.excess, EXCLUDED.note)
            """,
            [(pick_id, o.horizon, o.status, o.end_day, o.end_price, o.bench_end, o.ret, o.bench_ret, o.excess,
              o.signed_excess, o.hit, o.note) for o in outcomes],
        )


# ------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class RecordFilters:
    """What the record page is narrowed to; every field optional (``low``/``high``: the score band)."""

    first: date | None = None
    last: date | None = None
    account: str | None = None
    opp_type: str | None = None
    low: int | None = None
    high: int | None = None

    def params(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "account": self.account, "opp_type": self.opp_type,
                "low": self.low, "high": self.high}


_WHERE = """
    (%(first)s::date IS NULL OR p.pick_day >= %(first)s) AND (%(last)s::date IS NULL OR p.pick_day <= %(last)s)
    AND (%(account)s::text IS NULL OR p.account = %(account)s) AND (%(opp_type)s::text IS NULL OR p.opp_type = %(opp_type)s)
    AND (%(low)s::int IS NULL OR p.score BETWEEN %(low)s AND %(high)s)
"""


def summary_groups(conn: psycopg.Connection, filters: RecordFilters, horizon: int) -> list[Row]:
    """The record's summaries at ``horizon`` aggregated in SQL (outcomes.Group.from_sums): one row per score band
    (``dim`` 'band', ``key`` its BANDS key), account, type, direction and one for all (``dim`` 'all'), each with
    the counts of its picks by outcome and the sums the mean and its interval need; ``biased``: the sample's
    picks measured against a price index (market/basis.py: their excess leaves the benchmark's dividends out)."""
    band = "CASE " + " ".join(f"WHEN p.score >= {low} THEN '{key}'" for key, _, low, _ in BANDS) + " END"
    priced = "ok AND status IN ('measured', 'suspended') AND excess IS NOT NULL"  # suspended: at its last close
    directed, undirected = f"{priced} AND hit IS NOT NULL", f"{priced} AND hit IS NULL"
    unpriced = "ok AND status IN ('suspended', 'no_data') AND excess IS NULL"
    return conn.execute(
        f"""
        WITH r AS (
            SELECT {band} AS band, p.account, p.opp_type, p.direction, p.status = 'measurable' AS ok, o.status,
                   o.hit, o.excess, o.signed_excess,
                   coalesce(p.benchmark <> ALL(%(total_return)s) AND p.instrument !~ {basis.INDEX_KEY_SQL}, false)
                       AS biased
            FROM track_pick p LEFT JOIN track_outcome o ON o.pick_id = p.id AND o.horizon = %(horizon)s
            WHERE {_WHERE}
        )
        SELECT CASE WHEN GROUPING(band) = 0 THEN 'band' WHEN GROUPING(account) = 0 THEN 'account'
                    WHEN GROUPING(opp_type) = 0 THEN 'type' WHEN GROUPING(direction) = 0 THEN 'direction'
                    ELSE 'all' END AS dim,
               coalesce(band, account, opp_type, direction, '') AS key,
               count(*) AS picks,
               count(*) FILTER (WHERE ok AND status = 'measured') AS measured,
               count(*) FILTER (WHERE {directed}) AS directional,
               count(*) FILTER (WHERE {directed} AND hit) AS hits,
               count(*) FILTER (WHERE {directed} AND status = 'suspended') AS marked,
               count(*) FILTER (WHERE {directed} AND biased) AS biased,
               count(*) FILTER (WHERE {directed} AND status = 'suspended' AND hit) AS marked_hits,
               count(*) FILTER (WHERE {unpriced}) AS unpriced,
               count(*) FILTER (WHERE {unpriced} AND direction IN ('bullish', 'bearish')) AS unpriced_calls,
               count(*) FILTER (WHERE NOT ok) AS unmeasurable,
               count(*) FILTER (WHERE ok AND status = 'suspended') AS suspended,
               count(*) FILTER (WHERE ok AND status = 'no_data') AS no_data,
               count(*) FILTER (WHERE ok AND (status IS NULL OR status = 'waiting')) AS waiting,
               count(*) FILTER (WHERE {undirected} OR (ok AND status = 'measured' AND excess IS NULL)) AS undirected,
               count(*) FILTER (WHERE {undirected}) AS plain_n,
               sum(signed_excess) FILTER (WHERE {directed}) AS excess_sum,
               sum(signed_excess * signed_excess) FILTER (WHERE {directed}) AS excess_squares,
               sum(excess) FILTER (WHERE {undirected}) AS plain_sum,
               sum(excess * excess) FILTER (WHERE {undirected}) AS plain_squares
        FROM r GROUP BY GROUPING SETS ((band), (account), (opp_type), (direction), ())
        """,
        {**filters.params(), "horizon": horizon, "total_return": sorted(basis.PRICE_OF)},
    ).fetchall()


_OUTCOMES = """coalesce((SELECT jsonb_agg(jsonb_build_object('horizon', o.horizon, 'status', o.status,
        'end_day', o.end_day, 'ret', o.ret, 'bench_ret', o.bench_ret, 'excess', o.excess, 'signed_excess', o.signed_excess, 'hit', o.hit,
        'note', o.note)
        ORDER BY o.horizon) FROM track_outcome o WHERE o.pick_id = p.id), '[]'::jsonb)"""


def record_page(conn: psycopg.Connection, filters: RecordFilters, limit: int, offset: int) -> tuple[list[Row], int]:
    """The picks of one page, newest first, with their three outcomes (``outcomes``: a JSON list); the total."""
    rows = conn.execute(
        f"""
        WITH page AS (
            SELECT p.id, count(*) OVER () AS total FROM track_pick p WHERE {_WHERE}
            ORDER BY p.picked_at DESC, p.id DESC LIMIT %(limit)s OFFSET %(offset)s
        )
        SELECT p.*, page.total, {_OUTCOMES} AS outcomes
        FROM page JOIN track_pick p ON p.id = page.id ORDER BY p.picked_at DESC, p.id DESC
        """,
        {**filters.params(), "limit": limit, "offset": offset},
    ).fetchall()
    if rows or offset == 0:
        return rows, (rows[0]["total"] if rows else 0)
    total = conn.execute(f"SELECT count(*) AS n FROM track_pick p WHERE {_WHERE}", filters.params()).fetchone()["n"]
    return rows, total  # a page past the end: no rows, but the total still counts


def record_choices(conn: psycopg.Connection) -> tuple[list[str], list[str]]:
    """The accounts and types that have picks (the filters' choices)."""
    row = conn.execute(
        """
        SELECT ARRAY(SELECT DISTINCT account FROM track_pick WHERE account <> '' ORDER BY account LIMIT 500) AS accounts,
               ARRAY(SELECT DISTINCT opp_type FROM track_pick ORDER BY opp_type) AS types
        """
    ).fetchone()
    return list(row["accounts"]), list(row["types"])


def pick_of_analysis(conn: psycopg.Connection, analysis_id: int) -> Row | None:
    """The pick an analysis is part of (as the measured analysis or as a member of the pick's event)."""
    return conn.execute(
        f"""
        SELECT p.*, {_OUTCOMES} AS outcomes
        FROM track_pick p
        WHERE p.analysis_id = %(id)s
           OR p.event_id = (SELECT coalesce(a.event_id, a.id) FROM analysis_result a WHERE a.id = %(id)s)
        ORDER BY (p.analysis_id = %(id)s) DESC LIMIT 1
        """,
        {"id": analysis_id},
    ).fetchone()


def outcome_means(conn: psycopg.Connection, horizon: int) -> list[Row]:
    """Per account and per type: directional picks with a price at ``horizon`` (measured, or suspended and marked
    at the last close) and their mean signed excess return (the rank's outcome part)."""
    return conn.execute(
        """
        SELECT 'account' AS kind, p.account AS key, count(*) AS n, avg(o.signed_excess) AS mean
        FROM track_pick p JOIN track_outcome o ON o.pick_id = p.id AND o.horizon = %(h)s
        WHERE o.status IN ('measured', 'suspended') AND o.signed_excess IS NOT NULL AND p.account <> ''
        GROUP BY p.account
        UNION ALL
        SELECT 'type', p.opp_type, count(*), avg(o.signed_excess)
        FROM track_pick p JOIN track_outcome o ON o.pick_id = p.id AND o.horizon = %(h)s
        WHERE o.status IN ('measured', 'suspended') AND o.signed_excess IS NOT NULL GROUP BY p.opp_type
        """,
        {"h": horizon},
    ).fetchall()


def outcome_version(conn: psycopg.Connection) -> tuple[Any, ...]:
    """Changes whenever an outcome does (the pages' cached rank weights are learned again)."""
    row = conn.execute("SELECT count(*) AS n, max(updated_at) AS at FROM track_outcome").fetchone()
    return (row["n"], row["at"])


def save_push_prices(conn: psycopg.Connection, analysis_id: int, at: datetime, lines: Sequence[str]) -> None:
    """What the first push that told of an analysis said of its targets' moves (pushes/context.py); kept."""
    conn.execute("INSERT INTO push_prices (analysis_id, computed_at, lines) VALUES (%s, %s, %s) "
                 "ON CONFLICT (analysis_id) DO NOTHING", (analysis_id, at, Jsonb(list(lines))))


def push_prices_of(conn: psycopg.Connection, analysis_id: int) -> Row | None:
    return conn.execute("SELECT computed_at, lines FROM push_prices WHERE analysis_id = %s", (analysis_id,)).fetchone()
