"""The daily report: always built, degraded rather than failed.

The day is the Asia/Shanghai calendar day of the slot runs that produced the analyses. Stats are computed
from the database, never taken from the LLM; top opportunities citing unknown analysis ids are dropped.
The report is built from what is done: articles still waiting for an analysis (a deadline came first, or
the slot's cap) are listed as pending, for the next day's slots. Its status says what it is: ok (the LLM's
digest of a complete day), partial (built, with the reasons: a digest from the database alone because the
call failed or ran out of time, pending or failed analyses, a failed slot). "Failed" (nothing could be built)
is only ever written by the push step when this step itself crashed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from include.radar import store
from include.radar.analysis.llm import (
    LLMConfigError,
    LLMDeadline,
    LLMExhausted,
    LLMRejected,
)
from include.radar.analysis.prompting import Prompt, neutralise_delimiters
from include.radar.analysis.schemas import DailyDigest
from include.radar.analysis.spending import Asking, Spend
from include.radar.collect import watch
from include.radar.collect.coverage import Coverage
from include.radar.core.settings import Settings
from include.radar.core.slots import local_day_bounds, to_local
from include.radar.pushes import decide, events, ranking
from include.radar.store.events import with_pushes

log = logging.getLogger(__name__)

DIGEST_PROMPT = Prompt("digest", "v2")
MAX_ITEMS_IN_PROMPT = 60
MAX_PENDING_LISTED = 50


@dataclass(frozen=True)
class DayFacts:
    day: date
    analyses: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    slot_runs: list[dict[str, Any]]
    threshold: int
    pending: list[dict[str, Any]]
    spend: float = 0.0
    currency: str = "USD"
    budget_deferred: int = 0
    coverage: Coverage | None = None  # which accounts the day covered (None: it could not be worked out)

    @property
    def stats(self) -> dict[str, Any]:
        # a repost reuses an earlier analysis: it is not a new opportunity (the same rule as the slot push);
        # analyses of one real-world event are one opportunity
        opportunities = {events.event_of(a) for a in self.analyses if decide.is_opportunity(a, self.threshold)}
        return {
            "analysed": len(self.analyses),
            "events": len(self.entries),
            "opportunities": len(opportunities),
            "failed": len(self.failures),
            "pending": len(self.pending),
            "max_score": max((a["score"] for a in self.analyses), default=None),
            "cost": round(self.spend, 6),  # every call of the day, failed ladders and the digest included
            "currency": self.currency,
            "budget_deferred": self.budget_deferred,
            "coverage": self.coverage.as_stats() if self.coverage else None,
        }

    @property
    def entries(self) -> list[events.Entry]:
        """The day's analyses one entry per real-world event, best first (reposts fold into their original's)."""
        return events.entries(self.analyses)

    @property
    def slots_done(self) -> list[str]:
        return [r["slot"] for r in self.slot_runs if r["status"] == store.common.SUCCESS]

    @property
    def slot_errors(self) -> list[str]:
        return [f"{r['slot']}: {r['error']}" for r in self.slot_runs if r["status"] == store.common.SLOT_FAILED and r["error"]]


def gather(conn: Any, day: date, threshold: int, currency: str = "USD",
           min_picks: int = ranking.DEFAULT_MIN_PICKS, *, now: datetime) -> DayFacts:
    """The day's analyses, failures and slot runs, the articles published by the day's end that still
    wait for an analysis, and what the day's calls cost."""
    weights = ranking.learned(conn, now, min_picks)
    return DayFacts(
        day=day,
        # ordered by rank: the reader's watchlist and feedback decide which of equal scores comes first
        analyses=ranking.order(ranking.annotate(with_pushes(conn, store.analyses.day_analyses(conn, day), day), weights)),
        failures=store.analyses.day_failures(conn, day),
        slot_runs=store.slot_runs.slot_runs_for_day(conn, day),
        threshold=threshold,
        pending=store.analyses.pending_items(conn, local_day_bounds(day)[1], MAX_PENDING_LISTED),
        spend=store.operations.day_spend(conn, day, currency),
        currency=currency,
        budget_deferred=store.operations.day_budget_deferred(conn, day),
        coverage=_coverage(conn, day, now),
    )


def _coverage(conn: Any, day: date, now: datetime) -> Coverage | None:
    """The day's account coverage; a failure to work it out costs only that line of the report."""
    try:
        with conn.transaction():
            return watch.coverage_of(conn, day, now)
    except Exception:  # the report goes out without it rather than not at all
        log.exception("the account coverage of %s could not be worked out", day)
        return None


def compact(facts: DayFacts, analysis_url: Callable[[int], str]) -> dict[str, Any]:
    """Seed 9.1's compact structure: what the digest prompt sees of each analysis and failure."""
    items = []
    for entry in facts.entries[:MAX_ITEMS_IN_PROMPT]:
        a = entry.lead
        published = to_local(a["published_at"])
        opportunities = (a["result_json"] or {}).get("opportunities", []) if isinstance(a["result_json"], dict) else []
        items.append({
            "analysis_id": a["id"],
            "title": a["title"],
            "mp_name": a["mp_name"],
            "published_at": published.strftime("%Y-%m-%d %H:%M") if published else "",
            "score": a["score"],
            "has_opportunity": a["has_opportunity"],
            "top_type": a["top_type"],
            "evidence_verified": decide.verified(a),  # false: its quotes are not in the article, never a top pick
            "summary": a["summary"],
            "analysis_url": analysis_url(a["id"]),
            # one real-world event: the other accounts' articles about it (cite the lead's analysis_id)
            "other_sources": [{"mp_name": m["mp_name"], "title": m["title"]} for m in entry.others[:5]],
            "opportunities_brief": [
                {"name": o.get("name"), "type": o.get("type"), "direction": o.get("direction"),
                 "targets": (o.get("targets") or [])[:5]}
                for o in opportunities[:3]
            ],
        })
    failures = [{"title": f["title"], "mp_name": f["mp_name"], "error": (f["last_error"] or "")[:120]}
                for f in facts.failures[:20]]
    return {"date": facts.day.isoformat(), "analyses": items, "failures": failures}


def fallback_markdown(facts: DayFacts) -> str:
    """A digest from the database alone, standing in when the LLM cannot write one."""
    stats = facts.stats
    lines = [
        "## 今日概况（系统自动生成）",
        f"- 分析 {stats['analysed']} 篇，机会 {stats['opportunities']} 条，失败 {stats['failed']} 篇"
        + (f"，最高分 {stats['max_score']}" if stats["max_score"] is not None else ""),
    ]  # which slots are done is the page's header, live (the slot building this report is not done yet)
    if facts.coverage:
        lines.append(f"- {md_text(facts.coverage.line())}")
    # verified evidence first: an analysis whose quotes are not in its article ranks below, marked
    best = facts.entries[:5]  # one line per event, led by its best-evidenced analysis
    if best:
        lines += ["", "## 评分最高的文章"]
        lines += [f"- {e.lead['score']} 分 · {md_text(e.lead['title'])}：{md_text(e.lead['summary'])}"
                  + ("（证据未核实）" if not decide.verified(e.lead) else "")
                  + (f"（{len(e.sources)} 个公众号报道：{md_text('、'.join(e.sources))}）" if len(e.sources) > 1 else "")
                  for e in best]
    if facts.failures:
        lines += ["", "## 分析失败"]
        lines += [f"- {md_text(f['title'])}：{md_text((f['last_error'] or '')[:80])}" for f in facts.failures[:10]]
    if facts.budget_deferred:
        lines += ["", f"## 预算已用尽：{facts.budget_deferred} 篇顺延到次日分析"]
    if facts.pending:
        lines += ["", f"## 待分析（{len(facts.pending)} 篇，次日时段继续）"]
        lines += [f"- {md_text(p['title'])}" for p in facts.pending[:10]]
    if facts.slot_errors:
        lines += ["", "## 时段错误"]
        lines += [f"- {md_text(e[:200])}" for e in facts.slot_errors]
    return "\n".join(lines)


def md_text(text: str) -> str:
    """Neutralise markdown syntax in text that came from an article or the LLM."""
    out = str(text).replace("\n", " ")
    for ch in "\\`*_[]<>#|":
        out = out.replace(ch, "\\" + ch)
    return out


def build_report(asking: Asking, *, day: date, analysis_url: Callable[[int], str],
                 upstream_errors: list[str] | None = None) -> dict[str, Any]:
    """Gather the day, ask for the digest, validate it and upsert daily_report. Never raises for LLM failures.
    ``asking.deadline`` bounds the digest call: past it, the database summary stands in."""
    connect, settings = asking.connect, asking.settings
    # the report fails for this slot's own failures (and a failed digest); an earlier slot's hiccup that
    # later slots made up for is a warning, listed in the report, not a failed day
    reasons = list(upstream_errors or []) + _group_events(connect, timedelta(hours=settings.event_window_hours))
    with connect() as conn:
        facts = gather(conn, day, settings.push_score_threshold, settings.deepseek_currency, settings.outcome_min_picks,
                       now=asking.clock.now())
    if facts.failures and not facts.analyses:  # a failed article never fails its slot, but a day of them fails the report
        reasons.append(f"analysis: 当日 {len(facts.failures)} 篇分析全部失败"
                       f"（{(facts.failures[0]['last_error'] or '')[:200]}）")
    compacted = compact(facts, analysis_url)
    key = digest_key(compacted, settings)
    asked = Asked(None)
    if facts.analyses:
        asked = _day_digest(asking, compacted, key, day)
    if asked.error:
        reasons.append(asked.error)
    reasons += _day_warnings(facts)
    if asked.digest is not None:
        digest_json = _llm_json(connect, asked.digest, facts, day=day, key=key)
        digest_md = asked.digest.digest_md
    else:
        digest_json = _fallback_json(facts, settings.push_score_threshold)
        digest_md = fallback_markdown(facts) if (facts.analyses or facts.failures or reasons) else "今日没有新的分析结果。"
    digest_json["step_errors"] = list(upstream_errors or [])
    digest_json["pending"] = _pending(facts)
    partial = bool(reasons) or (asked.digest is None and bool(facts.analyses))
    stats = facts.stats
    report = {
        "report_date": day,
        "status": store.common.REPORT_PARTIAL if partial else store.common.REPORT_OK,
        "digest_md": digest_md,
        "digest_json": digest_json,
        "slots_done": facts.slots_done,
        "stats": stats,
        "model": asked.model,
        "prompt_version": asked.prompt_version,
        "error": "\n".join(dict.fromkeys(reasons)) or None,
        "slot_run_id": asking.slot_run_id,
    }
    with connect() as conn:
        row = store.reports.upsert_daily_report(conn, report)
    log.info("daily report %s: %s, %d analysed, %d opportunities, %d failed, %d pending",
             day, "partial" if partial else "ok", stats["analysed"], stats["opportunities"], stats["failed"],
             stats["pending"])
    return {"report_id": row["id"], "status": row["status"], **stats}


def _group_events(connect: Callable[[], Any], window: timedelta) -> list[str]:
    """Group the analyses no slot grouped yet (a slot failed before its summary); the reason when that failed."""
    try:
        events.group_new(connect, window)
    except Exception as exc:  # the report goes out ungrouped rather than not at all
        log.exception("grouping the day's analyses into events failed; the report lists them one by one")
        return [f"grouping: {type(exc).__name__}: {str(exc)[:200]}"]
    return []


def _day_digest(asking: Asking, compacted: dict[str, Any], key: str, day: date) -> Asked:
    """The LLM's digest of the day: the one already stored from the same facts (paid for once), else asked."""
    with asking.connect() as conn:
        kept = stored_digest(store.reports.get_daily_report(conn, day), key)
    if kept is not None:  # a rerun over the same analyses: the digest was paid for once, it is kept
        log.info("digest for %s: the LLM's digest of these same analyses is kept; no second call", day)
        return Asked(*kept)
    # titles and summaries are outside text: they cannot close the data block
    data = neutralise_delimiters(json.dumps(compacted, ensure_ascii=False))
    user = DIGEST_PROMPT.user(date=day.isoformat(), threshold=str(asking.settings.push_score_threshold), data=data)
    return ask_llm(asking, DIGEST_PROMPT, user, what=f"digest for {day}")


def _day_warnings(facts: DayFacts) -> list[str]:
    """What makes a built day partial besides the digest: a lapsed WeChat login, the budget, pending articles."""
    reasons = []  # ``kind: detail``, the detail in the reader's words (the page names the kind, web/views/daily.py)
    if facts.coverage and facts.coverage.unscanned:
        reasons.append("werss: 还没有扫码登录微信（二维码从未扫描），采集不到任何文章")
    elif facts.coverage and facts.coverage.login_lapsed:
        reasons.append("werss: 微信登录已过期，采集已停止，重新扫码之后恢复")
    elif facts.coverage and facts.coverage.nothing_collected:
        reasons.append("werss: 没有一个公众号显示 WeRSS 在采集（按更新节奏该有的文章没有出现，最近一天 WeRSS 也没有采集记录）")
    if facts.budget_deferred:
        reasons.append(f"budget: 当日 LLM 预算用尽，{facts.budget_deferred} 篇顺延到次日分析")
    if facts.pending:
        reasons.append(f"pending: {len(facts.pending)}{'+' if len(facts.pending) >= MAX_PENDING_LISTED else ''} "
                       "篇文章仍在等待分析（后续时段继续）")
    return reasons


def _llm_json(connect: Callable[[], Any], digest: DailyDigest, facts: DayFacts, *, day: date,
              key: str) -> dict[str, Any]:
    """The stored form of the LLM's digest: its picks that cite a known, verified analysis, each as its
    event's lead (once), and the ids it cited that were dropped."""
    with connect() as conn:
        known = store.analyses.existing_analysis_ids(conn, [t.analysis_id for t in digest.top_opportunities])
    dropped = [t.analysis_id for t in digest.top_opportunities if t.analysis_id not in known]
    if dropped:
        log.warning("digest for %s cited unknown analysis ids %s; dropped", day, dropped)
    # a pick of any analysis of an event stands for the event's lead, once
    entry_of = {m["id"]: e for e in facts.entries for m in e.members}
    tops, seen = [], set()
    for t in digest.top_opportunities:
        entry = entry_of.get(t.analysis_id)
        if t.analysis_id not in known or entry is None or entry.lead["id"] in seen:
            continue
        if not decide.verified(entry.lead):
            dropped.append(t.analysis_id)
            continue
        seen.add(entry.lead["id"])
        tops.append({**t.model_dump(), "analysis_id": entry.lead["id"], "sources": entry.sources,
                     **_follow_up(entry)})
    return {
        "has_opportunity": facts.stats["opportunities"] > 0,
        "top_opportunities": tops,
        "watchlist": digest.watchlist,
        "dropped_analysis_ids": dropped,
        "source": "llm",
        "digest_key": key,  # what the digest was written from: a rerun over the same keeps it (stored_digest)
        "picks": [t.model_dump() for t in digest.top_opportunities],  # the answer's own, before the leads
        "warnings": facts.slot_errors,
    }


def _follow_up(entry: events.Entry) -> dict[str, str]:
    """A top event pushed on an earlier day: by which slot (``MM-DD HH:MM``), for the push to mark it a follow-up."""
    pushed = next((m["pushed"] for m in entry.members if m.get("follow_up")), None)
    return {"follow_up": pushed} if pushed else {}


def _fallback_json(facts: DayFacts, threshold: int) -> dict[str, Any]:
    """The database's summary: the first three events whose lead is an opportunity."""
    tops = [{"analysis_id": e.lead["id"], "title": e.lead["title"], "reason": f"评分 {e.lead['score']}",
             "sources": e.sources, **_follow_up(e)}
            for e in facts.entries if decide.is_opportunity(e.lead, threshold)][:3]
    return {"has_opportunity": bool(tops), "top_opportunities": tops, "watchlist": [],
            "source": "fallback", "warnings": facts.slot_errors}


@dataclass(frozen=True)
class Asked:
    """A digest the LLM wrote (with its model and prompt version), or None and why the database's stands in."""

    digest: DailyDigest | None
    model: str | None = None
    prompt_version: str | None = None
    error: str | None = None


def ask_llm(asking: Asking, prompt: Prompt, user: str, *, what: str) -> Asked:
    """One digest call (the daily report's or the weekly summary's), what it cost recorded whatever happens.
    An LLM failure is an answer too: no digest, the reason; the caller falls back to the database's summary."""
    spend = Spend(asking.settings, item_id=None, attempt_id=None, slot_run_id=asking.slot_run_id,
                  model=asking.settings.deepseek_model, purpose="digest", clock=asking.clock)
    try:
        answer = asking.llm().complete_json(prompt.system(), user, DailyDigest, deadline=asking.deadline)
        spend.usage = answer.usage
        asked = Asked(answer.value, answer.model, prompt.label)  # type: ignore[arg-type]
    except (LLMExhausted, LLMConfigError, LLMRejected, LLMDeadline) as exc:
        spend.usage = exc.usage
        log.warning("%s falls back to the database summary: %s", what, exc)
        asked = Asked(None, error=f"digest: {exc}")
    with asking.connect() as conn:
        spend.record(conn)
    return asked


def digest_key(compacted: dict[str, Any], settings: Settings) -> str:
    """What a digest is written from, as a hash: the day's analyses and failures as the prompt shows them (in
    a fixed order: the rank may change with a verdict, the facts do not), the threshold, the model and the
    prompt's version. A rerun with the same key has nothing new to say; one that analysed more has."""
    canonical = {
        "date": compacted["date"],
        "analyses": sorted(compacted["analyses"], key=lambda a: a["analysis_id"]),
        "failures": sorted(json.dumps(f, ensure_ascii=False, sort_keys=True) for f in compacted["failures"]),
        "threshold": settings.push_score_threshold, "model": settings.deepseek_model, "prompt": DIGEST_PROMPT.label,
    }
    return hashlib.sha256(json.dumps(canonical, ensure_ascii=False, sort_keys=True, default=str).encode()).hexdigest()


def stored_digest(report: dict[str, Any] | None, key: str) -> tuple[DailyDigest, str | None, str | None] | None:
    """The LLM's digest a stored report was built from, with its model and prompt version, when it was written
    from ``key``'s facts; None otherwise — no report, a fallback (a failed digest is asked again: that call is
    the one a rerun may pay), other facts, or a row from before the key was kept."""
    data = report["digest_json"] if report else None
    if not isinstance(data, dict) or data.get("source") != "llm" or data.get("digest_key") != key:
        return None
    try:
        digest = DailyDigest.model_validate({
            "has_opportunity": bool(data.get("has_opportunity")), "top_opportunities": data.get("picks") or [],
            "digest_md": report["digest_md"] or "", "watchlist": data.get("watchlist") or []})
    except ValidationError:
        return None
    return digest, report["model"], report["prompt_version"]


def _pending(facts: DayFacts) -> list[dict[str, Any]]:
    """The pending articles as the report lists them (a snapshot: the next slots analyse them)."""
    return [{"item_id": p["id"], "title": p["title"], "mp_name": p["mp_name"], "url": p["url"],
             "published_at": p["published_at"].isoformat() if p["published_at"] else None}
            for p in facts.pending]
