"""``select_articles``: the articles this slot analyses, split into the batches ``analyse`` is mapped over.

First what a changed profile gives back, then pending articles and earlier failures under the attempt limit,
oldest first, within the slot's cap; the reader's rules exclude some before anything is paid; the day's budget
and the daily deadline may leave the rest for later slots.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.analysis import batches, focus, llm, regex_rules, spending
from include.radar.core.clock import Clock
from include.radar.core.settings import Settings
from include.radar.core.slots import SlotKey, slot_for
from include.radar.steps.runtime import Runtime, slot_key, step, step_deadline

log = logging.getLogger(__name__)
RULES_SECONDS = 10.0  # the reader's regex rules over a slot's articles (50 take ~0.1 s with rules that were saved)
RECHECK_SECONDS = 5.0  # and over what older rules excluded, after a change of the rules
RECHECK_BATCH = 500  # excluded articles re-checked per slot, newest first; the next slot takes the rest


def own_articles(key: SlotKey, settings: Settings) -> tuple[datetime, datetime]:
    """(start, end] of the publication times a backfill or a redo of ``key`` analyses: after the planned
    slot before it, up to its own time. Each article has exactly one such slot, so backfill runs going at
    once, or out of order, never take each other's articles; older ones wait for the next live slot."""
    previous = slot_for(key.scheduled_at - timedelta(seconds=1), settings.schedule_slots)
    return previous.scheduled_at, key.scheduled_at


@step("select_articles")
def articles_to_analyse(rt: Runtime, slot: dict[str, Any]) -> list[dict[str, Any]]:
    """Pending articles and earlier failures under the attempt limit, oldest first, within the slot's cap."""
    with rt.connect() as conn:
        expired = store.claims.expire_leases(conn)
        if expired:
            log.warning("%d analyses whose worker was lost (lease expired) are failed, the attempt counted", expired)
        if slot.get("retry_failed"):
            log.info("slot %s: retry_failed requested: %d failed articles get fresh attempts",
                     slot["slot"], store.claims.reset_failed(conn))
        profile = focus.from_row(store.focus.get_profile(conn), store.focus.slow_rules(conn))
        slow: list[str] = []  # what the rules' time budgets left for the next slot, the rules switched off
        profile = _recheck(conn, slot, profile, slow, rt.clock)
        # a backfill or a redo takes only its own slot's articles, whatever order its runs go in
        own_only = slot["run_type"] == "backfill" or slot["explicit"]
        rows = store.claims.items_to_analyse(
            conn, max_attempts=rt.settings.max_analysis_attempts, limit=rt.settings.max_articles_per_slot,
            published_between=own_articles(slot_key(slot), rt.settings) if own_only else None,
        )
        rows = _without_excluded(conn, slot, profile, rows, slow, rt.clock)
        spent = spending.budget_reached(conn, rt.settings, rt.clock)
        budget_note = None
        if rows and spent is not None:
            store.operations.defer_for_budget(conn, slot["slot_run_id"], [r["id"] for r in rows], rt.clock.today())
            store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"budget: {len(rows)} analyses left for the next day (the day's LLM budget is reached)"])
            budget_note = (f"今日已花费 {rt.settings.price_table().money(spent)}，达到预算 "
                      f"{rt.settings.price_table().money(rt.settings.daily_budget)}；{len(rows)} 篇顺延到次日")
            log.warning("slot %s: %s", slot["slot"], budget_note)
            rows = []
        left = step_deadline(slot, "select_articles", rt.clock)
        if rows and left is not None and left - rt.clock.monotonic() < llm.MIN_CALL_SECONDS:
            store.slot_runs.add_deferred(conn, slot["slot_run_id"], len(rows))
            store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"deadline: {len(rows)} analyses left for later slots (the daily report is due first)"])
            log.warning("slot %s: the analysis deadline has passed; %d articles wait for later slots",
                        slot["slot"], len(rows))
            return []
    if budget_note:
        rt.alert("budget", budget_note, slot)
    if slow:
        rt.alert("rules_slow", "；".join(slow), slot)
    retries = sum(1 for r in rows if r["analyzed_status"] == store.common.FAILED)
    log.info("slot %s: %d articles to analyse (%d retries of earlier failures)", slot["slot"], len(rows), retries)
    return [{"item_id": r["id"], "title": r["title"][:80]} for r in rows]


def _switch_off_slow(conn: Any, slot: dict[str, Any], profile: focus.Profile, budget: regex_rules.Budget,
                     slow: list[str]) -> focus.Profile:
    """The profile without the regex rules that took over regex_rules.SLOT_RULE_MS on one article of this
    budget's, or were the dearest when all of them took over SLOT_ARTICLE_MS on one: switched off for good (stored; the profile page lists them and why), warned on the slot and
    told to the operator. The article it was slow on keeps the rule's answer."""
    (found, budget.slow), (totals, budget.totals) = (budget.slow, {}), (budget.totals, {})
    if not found:
        return profile
    reasons = {rule: f"时段 {slot['slot']} 中匹配一篇文章用了 {ms:.0f} 毫秒（上限 {regex_rules.SLOT_RULE_MS:.0f}）"
               if rule not in totals else f"时段 {slot['slot']} 中一篇文章的正则规则合计用了 {totals[rule]:.0f} 毫秒"
               f"（上限 {regex_rules.SLOT_ARTICLE_MS:.0f}），本规则 {ms:.0f} 毫秒" for rule, ms in found.items()}
    store.focus.switch_off_rules(conn, reasons)
    store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
        f"rules: switched off {len(found)} regex rule(s) over {regex_rules.SLOT_RULE_MS:g} ms on one article, or "
        f"dearest when all took over {regex_rules.SLOT_ARTICLE_MS:g} ms"])
    slow.append("读者的正则规则太慢，已停用：" + "、".join(f"{rule}（{ms:.0f} 毫秒/篇）" for rule, ms in found.items()))
    log.warning("slot %s: switched off %d regex rules over %g ms on one article (or %g ms all together)", slot["slot"],
                len(found), regex_rules.SLOT_RULE_MS, regex_rules.SLOT_ARTICLE_MS)
    return profile.switched_off(reasons)


def _recheck(conn: Any, slot: dict[str, Any], profile: focus.Profile, slow: list[str],
             clock: Clock) -> focus.Profile:
    """After the reader changed their rules: a batch of what the older rules excluded is checked again
    (RECHECK_BATCH articles, newest first, for RECHECK_SECONDS at most); those the current rules let through
    wait for analysis again. What this slot does not reach is re-checked by the next. Returns the profile
    without the rules switched off on the way (_switch_off_slow)."""
    since = slot_key(slot).scheduled_at - timedelta(hours=focus.RECHECK_HOURS)
    rows = store.focus.excluded_to_recheck(conn, since, focus.MATCH_CHARS, RECHECK_BATCH)
    if not rows:
        return profile
    budget = regex_rules.Budget(RECHECK_SECONDS, clock)
    back: list[int] = []
    kept: dict[int, str] = {}
    for row in rows:
        try:
            reason = profile.exclusion(row["title"], row["text"], budget)
        except regex_rules.OutOfTime:
            left = len(rows) - len(back) - len(kept)
            store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
                f"rules: the re-check of excluded articles stopped after {RECHECK_SECONDS:g} s (the reader's regex "
                f"rules are slow); {left} wait for the next slot"])
            slow.append(f"读者的正则规则耗时过长：重新检查已排除文章 {RECHECK_SECONDS:g} 秒内未完成，{left} 篇留给下个时段")
            log.warning("slot %s: re-checking excluded articles ran out of time; %d wait", slot["slot"], left)
            break
        profile = _switch_off_slow(conn, slot, profile, budget, slow)
        if reason is None:
            back.append(row["id"])
        else:
            kept[row["id"]] = reason
    reopened = store.focus.settle_recheck(conn, back, kept)
    if reopened:
        log.info("slot %s: the reader's changed rules give back %d excluded articles", slot["slot"], reopened)
    return _switch_off_slow(conn, slot, profile, budget, slow)


def _without_excluded(conn: Any, slot: dict[str, Any], profile: focus.Profile, rows: list[dict[str, Any]],
                      slow: list[str], clock: Clock) -> list[dict[str, Any]]:
    """The rows the reader's rules (focus.py) let through; the others are marked excluded and counted on the
    slot, before anything is paid for them. The regex rules get RULES_SECONDS: the rows they did not get to
    in that time are neither analysed nor excluded, they wait for the next slot (counted and warned here)."""
    if not rows or not profile.rules:
        return rows
    texts = store.focus.texts_of(conn, [r["id"] for r in rows], focus.MATCH_CHARS)
    budget = regex_rules.Budget(RULES_SECONDS, clock)
    reasons = {}
    checked = 0
    for r in rows:
        text = texts.get(r["id"])
        try:
            reason = profile.exclusion(text["title"], text["text"], budget) if text else None
        except regex_rules.OutOfTime:
            break
        profile = _switch_off_slow(conn, slot, profile, budget, slow)
        checked += 1
        if reason:
            reasons[r["id"]] = reason
    if reasons:
        marked = store.focus.exclude_items(conn, slot["slot_run_id"], reasons)
        log.info("slot %s: %d articles excluded by the reader's rules, not sent to the LLM", slot["slot"], marked)
    _switch_off_slow(conn, slot, profile, budget, slow)  # a rule slow on the article the budget ran out on
    waiting = len(rows) - checked
    if waiting:
        store.slot_runs.add_deferred(conn, slot["slot_run_id"], waiting)
        store.slot_runs.add_slot_warnings(conn, slot["slot_run_id"], "select_articles", [
            f"rules: {waiting} articles left for the next slot (the reader's regex rules took over "
            f"{RULES_SECONDS:g} s; they are not analysed before the rules have looked at them)"])
        slow.append(f"读者的正则规则耗时过长：{RULES_SECONDS:g} 秒内只检查了 {checked} 篇，{waiting} 篇留给下个时段"
                    "（规则检查前不分析）；请在关注设置中简化正则规则")
        log.warning("slot %s: the reader's regex rules ran out of time after %d articles; %d wait for the next slot",
                    slot["slot"], checked, waiting)
    return [r for r in rows[:checked] if r["id"] not in reasons]


def select_articles(rt: Runtime, slot: dict[str, Any]) -> list[dict[str, Any]]:
    """The articles to analyse, split into the batches the mapped analyse task runs (include/radar/analysis/batches.py)."""
    tasks = rt.settings.analysis_tasks
    return batches.plan(articles_to_analyse(rt, slot), tasks, batches.width(rt.settings.llm_concurrency, tasks))
