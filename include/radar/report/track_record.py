"""The track record's step (after the daily push): every pick followed in the market.

It records the picks (each pushed opportunity and each top pick of a report, one per event, dated when a
reader could first act on it, its instrument resolved once and kept so a rerun measures the same thing);
fetches what is missing, each thing at most once per Shanghai day, into a cache in PostgreSQL, stopping when
the source keeps failing; and computes each open pick's reference and outcomes (outcomes.py) from the cached
bars known by then, so a rerun writes the same rows. It has its own deadline: past it nothing more is fetched
and what needed it waits for the next day. The rules: docs/track-record.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.slots import SHANGHAI
from include.radar.market import MinuteBar, Source, SourceError, basis, outcomes
from include.radar.market.instruments import CN, HK, HSI, Instrument, Names, from_key, name_index, price_limit, resolve

log = logging.getLogger(__name__)

LISTINGS_MAX_AGE = timedelta(days=7)
LOOKBACK = timedelta(days=20)  # bars fetched before a pick's day: the previous close (an open at the limit)
INTRADAY_KEPT = timedelta(days=30)  # the source keeps 5-minute bars about this long
STOP_AFTER_FAILURES = 3
# A pick whose data never comes (a code the source does not know, a benchmark without the day) is not asked for
# every day forever: an instrument that never had a bar is fetched again after 1, 2, 4, then every 8 days, and
# NO_DATA_FINAL after the day the data is about the pick is "no data" for good (still in the denominators).
BACKOFF_MAX_DAYS = 8
NO_DATA_FINAL = timedelta(days=30)
NO_DATA_NOTE = "30 天后仍缺数据：记为缺数据，不再重试"
AT_DEADLINE = "到了本步骤的时限，其余行情留待次日"
# The pick rules' version (market/instruments.py): picks recorded under an older one are resolved again, once.
# 2: a company's own name never sets a sector benchmark; a name beside an index code must be that index's
RULES = 2
RULES_KEY = "track:rules"


@dataclass
class Update:
    """What one run did, for the log, the slot's warnings and the operator's alert."""

    new_picks: int = 0
    measurable: int = 0
    unmeasurable: int = 0
    fetched: int = 0
    from_cache: int = 0
    failed: list[str] = field(default_factory=list)
    computed: int = 0
    measured: int = 0
    left: int = 0  # instruments not fetched: the deadline came, or the source was down
    backed_off: int = 0  # instruments never seen with a bar, not asked for today (BACKOFF_MAX_DAYS)
    closed: int = 0  # picks whose missing data became final today (NO_DATA_FINAL)
    corrected: int = 0  # picks recorded under older pick rules that the current ones measure otherwise (RULES)
    stopped: str = ""

    def as_xcom(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}

    @property
    def problem(self) -> str:
        parts = []
        if self.failed:
            parts.append(f"{len(self.failed)} 次行情请求失败（{'; '.join(self.failed[:3])}）")
        if self.stopped:
            parts.append(self.stopped)
        return "；".join(parts)


def update(connect: Callable[[], Any], source: Callable[[], Source], *, now: datetime,
           deadline: float | None = None, clock: Clock = SYSTEM) -> Update:
    """Record new picks, fetch what today's run has not fetched yet, compute every open pick.

    ``source``: builds the market-data source (only called when something must be fetched: a warm cache
    imports no library). ``deadline``: ``clock.monotonic()`` value after which nothing more is fetched."""
    run = Update()
    lazy = _Lazy(source, deadline, clock)
    with connect() as conn:
        _record_picks(conn, lazy, now, run)
        _recheck_rules(conn, lazy, now, run)
    with connect() as conn:
        _fetch(conn, lazy, now, run)
    with connect() as conn:
        _compute(conn, lazy, now, run)
    log.info("track record: %d new picks (%d measurable, %d not), %d fetches, %d from the cache, %d failed, "
             "%d picks computed, %d measured%s", run.new_picks, run.measurable, run.unmeasurable, run.fetched,
             run.from_cache, len(run.failed), run.computed, run.measured, f"; {run.stopped}" if run.stopped else "")
    return run


class _Lazy:
    def __init__(self, factory: Callable[[], Source], deadline: float | None, clock: Clock) -> None:
        self.factory = factory
        self.deadline = deadline  # clock.monotonic() after which nothing more is fetched (every kind of fetch)
        self.clock = clock
        self.source: Source | None = None
        self.failures_in_a_row = 0
        self.successes = 0

    def __call__(self) -> Source:
        if self.source is None:
            self.source = self.factory()
        return self.source

    @property
    def down(self) -> bool:
        return self.failures_in_a_row >= STOP_AFTER_FAILURES and not self.successes

    @property
    def late(self) -> bool:
        return self.deadline is not None and self.clock.monotonic() > self.deadline


def _today(now: datetime) -> date:
    return now.astimezone(SHANGHAI).date()


def _try_fetch(conn: Any, lazy: _Lazy, what: str, now: datetime, run: Update, call: Callable[[Source], Any],
               save: Callable[[Any], int]) -> bool:
    """Fetch ``what`` unless today's run already did; record the outcome either way. True when usable data is
    in the cache."""
    day = _today(now)
    done = store.track.fetched(conn, what, day)
    if done is not None and done["ok"]:
        run.from_cache += 1
        return True
    if lazy.down:
        run.left += 1
        return False
    if lazy.late:  # the listings, the calendar, daily and 5-minute bars alike: the rest waits for tomorrow
        run.left += 1
        run.stopped = AT_DEADLINE
        return False
    try:
        rows = save(call(lazy()))
    except SourceError as exc:
        lazy.failures_in_a_row += 1
        run.failed.append(f"{what}: {exc}"[:300])
        store.track.record_fetch(conn, what, day, now, ok=False, error=str(exc))
        conn.commit()
        log.warning("track record: fetching %s failed (retried by the next day's run): %s", what, exc)
        if lazy.down:
            run.stopped = f"行情源连续 {STOP_AFTER_FAILURES} 次请求失败，今天不再请求，次日重试"
        return False
    lazy.failures_in_a_row = 0
    lazy.successes += 1
    run.fetched += 1
    store.track.record_fetch(conn, what, day, now, ok=True, rows=rows)
    conn.commit()
    return True


# ------------------------------------------------------------------------------------------------- picks


def _refresh_listings(conn: Any, lazy: _Lazy, now: datetime, run: Update) -> datetime | None:
    """Fetch the listed names when the cached ones are older than a week; when they were last updated."""
    updated = store.track.listings_updated(conn)
    if updated is None or now - updated > LISTINGS_MAX_AGE:
        _try_fetch(conn, lazy, "listings", now, run, lambda s: s.listings(),
                   lambda rows: store.track.save_listings(conn, rows))
        updated = store.track.listings_updated(conn)
    return updated


def _names(conn: Any, lazy: _Lazy, now: datetime, run: Update) -> Names | None:
    """The listed names (refreshed weekly); None when none could ever be had."""
    updated = _refresh_listings(conn, lazy, now, run)
    return name_index(store.track.listings(conn)) if updated is not None else None


def _fields(resolution: Any, by_key: dict[str, str]) -> dict[str, Any]:
    """The pick's columns from its resolution; ``by_key``: listed names by instrument key."""
    inst, bench = resolution.instrument, resolution.benchmark
    status = "measurable" if inst else "unresolved" if resolution.needs_names else "unmeasurable"
    return {
        "status": status, "reason": resolution.reason, "target": resolution.target[:200],
        "direction": resolution.direction, "opp_type": resolution.opp_type,
        "instrument": inst.key if inst else None, "instrument_name": (by_key.get(inst.key) or inst.name) if inst else "",
        "benchmark": bench.key if bench else None, "benchmark_name": bench.name if bench else "",
    }


def _opportunities(result_json: Any) -> list[dict[str, Any]]:
    opps = result_json.get("opportunities") if isinstance(result_json, dict) else None
    return [o for o in opps if isinstance(o, dict)] if isinstance(opps, list) else []


def _record_picks(conn: Any, lazy: _Lazy, now: datetime, run: Update) -> None:
    rows = store.track.new_picks(conn)
    waiting = store.track.unresolved_picks(conn)
    if not rows and not waiting:
        return
    names = store.track.listings(conn)
    index = name_index(names) if names else None
    needs = any(resolve(_opportunities(r["result_json"]), index).needs_names for r in [*rows, *waiting])
    if needs or waiting:
        index = _names(conn, lazy, now, run)
    by_key = index.by_key if index is not None else {}
    first: dict[int, dict[str, Any]] = {}
    for r in rows:  # one pick per event: the earliest moment a reader was shown it
        at = r["shown_at"] or now
        if r["event_id"] not in first or at < first[r["event_id"]]["picked_at"]:
            first[r["event_id"]] = {**r, "picked_at": at}
    for event_id, r in first.items():
        fields = _fields(resolve(_opportunities(r["result_json"]), index), by_key)
        inserted = store.track.insert_pick(conn, {
            **fields, "event_id": event_id, "analysis_id": r["analysis_id"], "origin": r["origin"],
            "picked_at": r["picked_at"], "pick_day": r["picked_at"].astimezone(SHANGHAI).date(),
            "score": r["score"], "account": (r["mp_name"] or "")[:100], "title": (r["title"] or "")[:300],
        })
        if inserted:
            run.new_picks += 1
            run.measurable += fields["status"] == "measurable"
            run.unmeasurable += fields["status"] == "unmeasurable"
    for w in waiting:
        fields = _fields(resolve(_opportunities(w["result_json"]), index), by_key)
        if fields["status"] != "unresolved":
            store.track.resolve_pick(conn, w["id"], fields)
    conn.commit()


def _recheck_rules(conn: Any, lazy: _Lazy, now: datetime, run: Update) -> None:
    """Once per change of the pick rules (RULES): the picks an older version could have got wrong
    (store.track.picks_to_recheck) resolved again. One the current rules measure against another benchmark, or
    not at all, gets the new fields and is computed again from the cache; any other difference (a listing
    renamed since) moves nothing. Without the listed names it waits for the next run."""
    if (store.operations.status(conn, RULES_KEY).get("version") or 0) >= RULES:
        return
    picks = store.track.picks_to_recheck(conn)
    index = _names(conn, lazy, now, run) if picks else None
    if picks and index is None:
        return
    for p in picks:
        fields = _fields(resolve(_opportunities(p["result_json"]), index), index.by_key)
        moved = fields["instrument"] == p["instrument"] and fields["benchmark"] != p["benchmark"]
        contradicted = fields["status"] == "unmeasurable" and p["instrument"].startswith(("SH:000", "SZ:399"))
        if moved or contradicted:
            store.track.redo_pick(conn, p["id"], fields)
            run.corrected += 1
    store.operations.update_status(conn, RULES_KEY, lambda _: {"version": RULES, "at": now.isoformat(), "corrected": run.corrected})
    conn.commit()
    if run.corrected:
        log.warning("track record: %d picks recorded under older pick rules resolved again", run.corrected)


# --------------------------------------------------------------------------------------------- fetching


def _instruments(picks: list[dict[str, Any]]) -> dict[str, tuple[Instrument, date]]:
    """Every instrument and benchmark the open picks need, with the first day its bars are needed from."""
    needed: dict[str, tuple[Instrument, date]] = {}
    for p in picks:
        for key, name in ((p["instrument"], p["instrument_name"]), (p["benchmark"], p["benchmark_name"])):
            inst = from_key(key or "", name)
            if inst is None:
                continue
            since = p["pick_day"] - LOOKBACK
            if key not in needed or since < needed[key][1]:
                needed[key] = (inst, since)
    for inst, since in list(needed.values()):  # a total-return index's opens and 5-minute bars are its twin's
        twin = basis.price_twin(inst)
        if twin is not None and (twin.key not in needed or since < needed[twin.key][1]):
            needed[twin.key] = (twin, since)
    if any(i.calendar == HK for i, _ in needed.values()) and HSI.key not in needed:
        needed[HSI.key] = (HSI, min(s for _, s in needed.values()))  # the Hong Kong calendar is the HSI's days
    return needed


def _due(attempts: tuple[int, date] | None, today: date) -> bool:
    """Whether an instrument that never had a bar is asked for today: at once, then 1, 2, 4 and every
    BACKOFF_MAX_DAYS days after the last try (``attempts``: the days it was tried on, the last one)."""
    if attempts is None:
        return True
    tried, last = attempts
    if last > today:  # a try dated after today (a clock set back, a replayed day) says nothing of today's data
        return True
    return last == today or (today - last).days >= min(2 ** (tried - 1), BACKOFF_MAX_DAYS)


def _fetch(conn: Any, lazy: _Lazy, now: datetime, run: Update) -> None:
    picks = store.track.open_picks(conn)
    if not picks:
        return
    needed = _instruments(picks)
    today = _today(now)
    if any(i.market in ("SH", "SZ") and i.kind != "index" for i, _ in needed.values()):
        _refresh_listings(conn, lazy, now, run)  # the listed names tell an ST stock's or an ETF's limit
    if any(i.calendar == CN for i, _ in needed.values()):
        _try_fetch(conn, lazy, "calendar:CN", now, run, lambda s: s.calendar(),
                   lambda days: store.track.save_calendar(conn, CN, days))
    attempts = store.track.fetch_attempts(conn, [f"daily:{k}" for k in needed])
    for key in sorted(needed):
        inst, since = needed[key]
        if lazy.late:
            run.left += 1
            run.stopped = AT_DEADLINE
            continue
        last = store.track.last_bar_day(conn, key)
        if last is None and not _due(attempts.get(f"daily:{key}"), today):
            run.backed_off += 1
            continue
        start = max(since, last - timedelta(days=7)) if last and last >= since else since  # a week of overlap

        def save(bars: list[Any], key: str = key) -> int:
            return store.track.save_bars(conn, key, bars)

        _try_fetch(conn, lazy, f"daily:{key}", now, run, lambda s, i=inst, a=start: s.daily(i, a, today), save)
    hk = store.track.bars_of(conn, [HSI.key], min((s for _, s in needed.values()), default=today))
    if hk.get(HSI.key):
        store.track.save_calendar(conn, HK, hk[HSI.key])
    conn.commit()


# -------------------------------------------------------------------------------------------- computing


def _coverage(conn: Any, keys: list[str], now: datetime) -> dict[str, date]:
    """The last day each instrument's cached bars are complete through: what the last successful fetch could
    see (a bar missing before it is a day without trade; after it, a day not fetched yet)."""
    rows = conn.execute(
        "SELECT what, max(fetched_at) AS at FROM market_fetch WHERE ok AND what = ANY(%s) GROUP BY what",
        ([f"daily:{k}" for k in keys],),
    ).fetchall()
    out = {}
    for r in rows:
        key = r["what"].removeprefix("daily:")
        inst = from_key(key)
        market = inst.calendar if inst else CN
        out[key] = outcomes.published_through(min(r["at"], now), market)
    return out


def _minutes(conn: Any, lazy: _Lazy, inst: Instrument, day: date, now: datetime, run: Update
             ) -> tuple[bool, list[Any] | None]:
    """(known, bars): the 5-minute bars of ``day`` (cached, else fetched once); known False when the fetch
    failed today (the pick waits for tomorrow's run)."""
    cached = store.track.intraday_of(conn, inst.key, day)
    if cached is None and _today(now) - day <= INTRADAY_KEPT:
        def save(bars: list[MinuteBar] | None) -> int:
            store.track.save_intraday(conn, inst.key, day, [[b.start.replace(tzinfo=None).isoformat(), b.open]
                                                            for b in bars or []])
            return len(bars or [])

        if not _try_fetch(conn, lazy, f"intraday:{inst.key}:{day.isoformat()}", now, run,
                          lambda s: s.intraday(inst, day), save):
            return False, None
        cached = store.track.intraday_of(conn, inst.key, day)
    if cached is None:
        return True, None
    return True, [MinuteBar(datetime.fromisoformat(s).replace(tzinfo=SHANGHAI), float(p)) for s, p in cached]


def _benchmark(bars: dict[str, dict[date, Any]], bench: Instrument) -> dict[date, Any]:
    """The benchmark's daily bars: a total-return index's with its twin's opens, scaled (market/basis.py)."""
    twin = basis.price_twin(bench)
    own = bars.get(bench.key, {})
    return basis.total_return_bars(own, bars.get(twin.key, {})) if twin else own


def _session_minutes(conn: Any, lazy: _Lazy, day: date, inst: Instrument, bench: Instrument,
                     bars: dict[str, dict[date, Any]], now: datetime, run: Update
                     ) -> tuple[bool, tuple[list[Any], list[Any]] | None]:
    """(known, the instrument's and the benchmark's 5-minute bars of ``day``, the push day, when there are both)
    for a push during the session; known False when a fetch failed today (the pick waits for tomorrow's run). A
    total-return benchmark's are its price twin's, scaled by the day's ratio of the closes."""
    known, minutes = _minutes(conn, lazy, inst, day, now, run)
    if not (known and minutes):
        return known, None
    twin = basis.price_twin(bench)
    known, theirs = _minutes(conn, lazy, twin or bench, day, now, run)
    if twin is not None:
        theirs = basis.scaled_minutes(theirs, bars.get(bench.key, {}), bars.get(twin.key, {}), day)
    return known, (minutes, theirs) if theirs else None


def _no_data_final(pick_day: date, ref: outcomes.Reference, results: list[outcomes.Outcome], today: date) -> bool:
    """Whether the pick's missing data is final: every horizon still open is "no data", NO_DATA_FINAL after the
    day it is about (its end day, else the reference's or the pick's). A source that has not filled a day in
    a month will not; a horizon still waiting keeps the pick open."""
    open_ = [o for o in results if not (o.status == "measured" or (
        o.status == "suspended" and (o.ret is not None or ref.price is None)))]
    if not open_ or any(o.status != "no_data" for o in open_):
        return False
    return all(today - (o.end_day or ref.day or pick_day) >= NO_DATA_FINAL for o in open_)


def _compute(conn: Any, lazy: _Lazy, now: datetime, run: Update) -> None:
    picks = store.track.open_picks(conn)
    if not picks:
        return
    needed = _instruments(picks)
    since = min(s for _, s in needed.values())
    bars = store.track.bars_of(conn, needed, since)
    coverage = _coverage(conn, list(needed), now)
    calendars = {CN: store.track.calendar(conn, CN, since), HK: store.track.calendar(conn, HK, since)}
    listed = store.track.listed_names(conn, needed)  # today's names: an ST mark comes and goes
    attempts = store.track.fetch_attempts(conn, [f"daily:{k}" for k in needed])
    for p in picks:
        inst = from_key(p["instrument"], listed.get(p["instrument"] or "") or p["instrument_name"])
        bench = from_key(p["benchmark"] or "", p["benchmark_name"])
        if inst is None or bench is None:
            continue
        days = calendars[inst.calendar]
        twin = basis.price_twin(bench)
        through = min([outcomes.published_through(now, inst.calendar)]
                      + [coverage.get(k, date.min) for k in (inst.key, bench.key, *([twin.key] if twin else []))])
        intraday, day = None, p["picked_at"].astimezone(SHANGHAI).date()
        if outcomes.during_session(p["picked_at"], inst.calendar, days) and day <= through:
            known, intraday = _session_minutes(conn, lazy, day, inst, bench, bars, now, run)
            if not known:
                continue  # the 5-minute bars could not be had today: tomorrow's run tries again
        own, theirs = bars.get(inst.key, {}), _benchmark(bars, bench)
        tried = f"daily:{inst.key}" in attempts and _today(now) - p["pick_day"] >= NO_DATA_FINAL
        if not own and (inst.key in coverage or tried):  # the source has nothing for it: said, not guessed
            ref = outcomes.Reference("no_data", note=f"行情源没有 {inst.key} 的行情（代码有误、未上市或早已退市）")
        else:
            ref = outcomes.reference(p["picked_at"], inst.calendar, days, own, theirs, through, intraday=intraday,
                                     limit=price_limit(inst, p.get("target") or "", p["pick_day"]))
        results = [outcomes.outcome(ref, h, days, own, theirs, through, p["direction"]) for h in outcomes.HORIZONS]
        if _no_data_final(p["pick_day"], ref, results, _today(now)):
            results = [replace(o, note=f"{o.note}；{NO_DATA_NOTE}") if o.status == "no_data" else o for o in results]
            store.track.close_no_data(conn, p["id"], _today(now))
            run.closed += 1
        store.track.save_reference(conn, p["id"], ref)
        store.track.save_outcomes(conn, p["id"], results)
        run.computed += 1
        run.measured += sum(o.status == "measured" for o in results)
    conn.commit()


# --------------------------------------------------------------------------------------- the daily step


def source_from(settings: Any, timeout: float | None = None) -> Callable[[], Source]:
    """The configured source, built only when called (the library is imported then); ``timeout``: one
    call's whole time (default market_data_timeout_seconds)."""
    if settings.market_data_source == "recorded":
        from include.radar.market.recorded import recorded_source

        if not settings.market_data_recorded_dir:
            raise ValueError("market_data_source=recorded needs market_data_recorded_dir (a directory of answers)")

        return lambda: recorded_source(settings.market_data_recorded_dir, 7 * settings.market_data_shift_weeks)

    def library() -> Source:
        from include.radar.market.akshare_source import library_source

        return library_source(timeout or settings.market_data_timeout_seconds)

    return library


def daily(connect: Callable[[], Any], settings: Any, slot: dict[str, Any], alert: Callable[[str], Any],
          *, clock: Clock = SYSTEM) -> dict[str, Any]:
    """The DAG's track_record task: at the daily slot, after the daily push. A failing source is a handled
    problem (the slot's warning, one operator alert a day, tomorrow's run retries); anything else fails the
    step."""
    if not slot["is_daily"]:
        return {"reason": "the track record is updated at the daily slot"}
    deadline = clock.monotonic() + settings.track_record_minutes * 60
    run = update(connect, source_from(settings), now=clock.now(), deadline=deadline, clock=clock)
    if run.problem:
        with connect() as conn:
            store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "track_record", [f"track record: {run.problem}"])
        if run.failed:
            alert(f"行情数据源请求失败：{run.problem}；相关的战绩次日重试")
    return run.as_xcom()
