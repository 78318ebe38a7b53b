"""The weekly summary: built at Sunday's 22:00 slot, after the daily push, from the week's analyses.

Same rules as the daily report (digest.py): one digest call over the week's events (ranked by the reader's
focus and feedback, at most MAX_EVENTS of them), validated; when the call fails (blank, not JSON, invalid,
out of time) a summary built from the database stands in, marked as such. A rerun of Sunday's 22:00 that
finds the week already summarised by the LLM does not pay for another call; the push goes through the
notification log under its own push type, so it is sent at most once per channel whatever reruns, clears or
retries happen. Backfills and redos build without pushing, ``force`` pushes again (decide.py's rules).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.analysis.prompting import Prompt, neutralise_delimiters
from include.radar.analysis.spending import Asking
from include.radar.market import outcomes
from include.radar.pushes import decide, events, ranking
from include.radar.report.digest import Asked, ask_llm, md_text

log = logging.getLogger(__name__)

WEEKLY_PROMPT = Prompt("weekly", "v1")
MAX_EVENTS = 40  # what the digest call sees: the week's best events
SUNDAY = 6


def week_of(day: date) -> tuple[date, date]:
    """(Monday, Sunday) of the week ``day`` is in."""
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def is_weekly_slot(day: date, is_daily: bool) -> bool:
    return is_daily and day.weekday() == SUNDAY


def gather(conn: Any, monday: date, min_picks: int = ranking.DEFAULT_MIN_PICKS, *, now: datetime
           ) -> tuple[list[events.Entry], dict[str, Any]]:
    first, last = monday, monday + timedelta(days=6)
    weights = ranking.learned(conn, now, min_picks)
    rows = ranking.order(ranking.annotate(store.weekly.week_analyses(conn, first, last), weights))
    fresh = [r for r in rows if not r.get("reused_from_id")]
    entries = events.entries(fresh)
    failed = store.weekly.week_failed(conn, first, last)
    return entries, {"analysed": len(rows), "events": len(entries), "failed": failed,
                     "max_score": max((r["score"] for r in fresh), default=None), "record": week_record(conn, first, last)}


def week_record(conn: Any, first: date, last: date) -> dict[str, int]:
    """The week's picks, how many are measured at outcomes.WEEK_HORIZON so far (with a price and a direction),
    and how many of them are right (the push says the rate only from outcomes.MIN_SAMPLE of them, as the page)."""
    groups = store.track.summary_groups(conn, store.track.RecordFilters(first=first, last=last), outcomes.WEEK_HORIZON)
    total = next((g for g in groups if g["dim"] == "all"), {})
    return {"picks": int(total.get("picks") or 0), "measured": int(total.get("directional") or 0),
            "hits": int(total.get("hits") or 0)}


def compact(entries: list[events.Entry], analysis_url: Callable[[int], str]) -> dict[str, Any]:
    return {"analyses": [
        {"analysis_id": e.lead["id"], "title": e.lead["title"], "mp_name": e.lead["mp_name"],
         "day": str(e.lead.get("run_date") or ""), "score": e.lead["score"], "top_type": e.lead["top_type"],
         "evidence_verified": decide.verified(e.lead), "summary": e.lead["summary"],
         "analysis_url": analysis_url(e.lead["id"]),
         "other_sources": [{"mp_name": m["mp_name"], "title": m["title"]} for m in e.others[:5]]}
        for e in entries[:MAX_EVENTS]]}


def fallback_markdown(monday: date, entries: list[events.Entry], stats: dict[str, Any], threshold: int) -> str:
    lines = [f"## 本周概况（{monday.isoformat()} 起）",
             f"- 分析 {stats['analysed']} 篇，合并为 {stats['events']} 个事件，失败 {stats['failed']} 篇"]
    best = entries[:8]
    if best:
        lines += ["", "## 本周评分最高"]
        lines += [f"- {e.lead['score']} 分 · {md_text(e.lead['title'])}：{md_text(e.lead['summary'])}"
                  + (f"（{len(e.sources)} 个公众号报道）" if len(e.sources) > 1 else "") for e in best]
    else:
        lines += ["", "本周没有分析结果。"]
    lines += ["", f"*摘要由系统根据本周的分析生成（推送阈值 {threshold} 分）。*"]
    return "\n".join(lines)


def build(asking: Asking, *, monday: date, analysis_url: Callable[[int], str]) -> dict[str, Any]:
    """Build (or keep) the week's summary; never raises for LLM failures. Returns the stored row."""
    connect, settings = asking.connect, asking.settings
    with connect() as conn:
        existing = store.weekly.get_weekly_report(conn, monday)
        if existing is not None and existing["status"] == store.common.REPORT_OK:
            log.info("weekly summary %s was built by the LLM already; no second call", monday)
            return existing
        entries, stats = gather(conn, monday, settings.outcome_min_picks, now=asking.clock.now())
    threshold = settings.push_score_threshold
    asked = Asked(None)
    if entries:
        data = neutralise_delimiters(json.dumps(compact(entries, analysis_url), ensure_ascii=False))
        user = WEEKLY_PROMPT.user(week_start=monday.isoformat(), week_end=(monday + timedelta(days=6)).isoformat(),
                                  threshold=str(threshold), data=data)
        asked = ask_llm(asking, WEEKLY_PROMPT, user, what=f"weekly summary {monday}")
    digest = asked.digest
    lead_of = {m["id"]: e for e in entries for m in e.members}
    if digest is not None:
        tops, seen = [], set()
        for t in digest.top_opportunities:
            entry = lead_of.get(t.analysis_id)
            if entry is None or entry.lead["id"] in seen or not decide.verified(entry.lead):
                continue
            seen.add(entry.lead["id"])
            tops.append({**t.model_dump(), "analysis_id": entry.lead["id"], "sources": entry.sources})
        digest_json = {"top_opportunities": tops, "watchlist": digest.watchlist, "source": "llm"}
        digest_md = digest.digest_md
    else:
        tops = [{"analysis_id": e.lead["id"], "title": e.lead["title"], "reason": f"评分 {e.lead['score']}",
                 "sources": e.sources} for e in entries if decide.is_opportunity(e.lead, threshold)][:3]
        digest_json = {"top_opportunities": tops, "watchlist": [], "source": "fallback"}
        digest_md = fallback_markdown(monday, entries, stats, threshold)
    stats["opportunities"] = sum(1 for e in entries if decide.is_opportunity(e.lead, threshold))
    report = {"week_start": monday, "status": store.common.REPORT_OK if digest is not None or not entries
              else store.common.REPORT_PARTIAL, "digest_md": digest_md, "digest_json": digest_json, "stats": stats,
              "model": asked.model, "prompt_version": asked.prompt_version, "error": asked.error, "slot_run_id": asking.slot_run_id}
    with connect() as conn:
        row = store.weekly.upsert_weekly_report(conn, report)
    log.info("weekly summary %s: %s, %d analysed, %d events", monday, digest_json["source"], stats["analysed"],
             stats["events"])
    return row


def title(monday: date, stats: dict[str, Any]) -> str:
    end = monday + timedelta(days=6)
    opportunities = stats.get("opportunities") or 0
    span = f"{monday.month}/{monday.day}–{end.month}/{end.day}"
    if opportunities:
        return f"【周报】{span}：{opportunities} 条机会（最高分 {stats.get('max_score')}）"
    return f"【周报】{span}：本周无投资机会"


def lines(row: dict[str, Any]) -> list[str]:
    stats = row["stats"] or {}
    out = [f"本周分析 {stats.get('analysed', 0)} 篇，{stats.get('events', 0)} 个事件，失败 {stats.get('failed', 0)} 篇"]
    out += decide.top_lines(row["digest_json"])
    record = stats.get("record") or {}
    if record.get("picks"):  # the page's rule: below MIN_SAMPLE the sample's size only, never hits nor a rate
        measured, hits = int(record.get("measured") or 0), int(record.get("hits") or 0)
        said = f"本周战绩：选出 {record['picks']} 条，T+{outcomes.WEEK_HORIZON} 已测 {measured} 条"
        if measured >= outcomes.MIN_SAMPLE:
            low, high = outcomes.wilson(hits, measured)
            said += f"，命中率 {hits / measured:.0%}（95% 区间 {low:.0%}–{high:.0%}）"
        else:
            said += f"（不足 {outcomes.MIN_SAMPLE} 条，不计命中率）"
        out.append(said + "（过往判断的记录，不是投资建议）")
    if (row["digest_json"] or {}).get("source") == "fallback":
        out.append("部分结果：摘要由系统根据本周的分析生成")
    return out
