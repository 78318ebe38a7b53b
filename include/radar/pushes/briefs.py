"""What the reader's pushes say (pure): a block per opportunity a reader can act on from the push alone — what
(the thesis), which (score, type, targets with their codes), which way (the direction), why (a verified quote),
who said it and when, how many accounts — and the 22:00 push's glance of the day.

The rows are analysis rows (store.analyses.slot_analyses / day_analyses, with ranking.annotate's ``watch_hits``) folded
into events (events.Entry); ``result_json`` is the model's validated answer, still read defensively. message.py
escapes and defangs all of it per channel.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any

from include.radar.core.slots import SHANGHAI
from include.radar.core.text import in_order
from include.radar.market import outcomes
from include.radar.pushes import events
from include.radar.pushes.decide import (
    SHARED_DIGITS,
    first_sentence,
    is_opportunity,
    plain_codes,
    sources_line,
    top_analysis_ids,
    verified,
    watch_line,
)
from include.radar.pushes.labels import direction_label, type_label
from include.radar.pushes.message import Block

MAX_ITEMS = 3  # opportunities in a slot's push; the rest are 「另有 N 条」 with the day's page
MAX_DAY_ITEMS = 5  # in the 22:00 push
THESIS_CHARS = 80
QUOTE_CHARS = 60
TARGET_CHARS = 24
ACCOUNT_CHARS = 16  # an account's name (WeChat's run to 30 characters, an article's author field to anything)
MAX_TARGETS = 4
RECORD_HORIZON = 5  # the record page's own (web/views/record.py's default): the push says what the page says
UNVERIFIED = "（证据未核实）"
PICK = "【精选】"  # the 22:00 push's mark of the day's report's picks (listed first)

# a security code in a target, in any spelling the model writes it (600519, 600519.SH, SH600519, 0700.HK,
# HK00700, 00700); a name beside it in brackets (贵州茅台（600519.SH）)
_A_SHARE = re.compile(r"^(?:(SH|SZ|BJ|SS)\s?)?([0-9]{6})(?:\.(SH|SZ|BJ|SS))?$", re.IGNORECASE)
_HK = re.compile(r"^(?:HK\s?([0-9]{1,5})|([0-9]{1,5})\.HK|(0[0-9]{4}))$", re.IGNORECASE)
_FOREIGN = re.compile(r"^(?:[A-Z]{1,5}\.(?:US|O|N|OQ)|[0-9]{4,6}\.(?:KS|KQ|T))$")  # as decide.plain_codes reads them
_NAMED = re.compile(r"^(?P<name>[^()]*?)\s*\((?P<code>[^()]+)\)$")


def plain_code(text: str) -> str | None:
    """The code as the radar writes it (600519, 00700, SH000001, TSLA, 005930.KS: decide.plain_codes), when
    ``text`` is a security code; else None."""
    text = unicodedata.normalize("NFKC", text).strip()
    if (a := _A_SHARE.match(text)) is not None:
        exchange = (a[1] or a[3] or "").upper().replace("SS", "SH")
        return exchange + a[2] if exchange and a[2].startswith(SHARED_DIGITS) else a[2]
    if _FOREIGN.match(text):
        return plain_codes(text)
    if (h := _HK.match(text)) is not None:
        return (h[1] or h[2] or h[3]).zfill(5)
    return None


def target_label(target: str) -> tuple[str, bool]:
    """A target as the push names it — ``贵州茅台 600519``, ``腾讯控股 00700``, ``600519`` — and whether it
    carries a code; anything else as the model wrote it, shortened."""
    text = in_order(unicodedata.normalize("NFKC", " ".join(str(target).split())))  # a mark inside a code would hide it
    named = _NAMED.match(text)
    name, code = (named["name"].strip(), plain_code(named["code"])) if named else ("", plain_code(text))
    if code is None:
        return plain_codes(text)[:TARGET_CHARS], False
    return f"{name[:TARGET_CHARS]} {code}".strip(), True


def _opportunities(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    result = analysis.get("result_json")
    found = result.get("opportunities") if isinstance(result, dict) else None
    return [o for o in found if isinstance(o, dict)] if isinstance(found, list) else []


def targets_line(analysis: dict[str, Any]) -> list[str]:
    """「标的：…」: the targets with a code first (of every opportunity), then the first opportunity's others."""
    opportunities = _opportunities(analysis)
    coded: list[str] = []
    others: list[str] = []
    for position, opp in enumerate(opportunities):
        for target in opp.get("targets") or [] if isinstance(opp.get("targets"), list) else []:
            if not isinstance(target, str) or not target.strip():
                continue
            label, has_code = target_label(target)
            if has_code:
                coded.append(label)
            elif position == 0:
                others.append(label)
    named = list(dict.fromkeys(coded + others))
    if not named:
        return []
    return ["标的：" + "、".join(named[:MAX_TARGETS]) + (f" 等 {len(named)} 个" if len(named) > MAX_TARGETS else "")]


def quote_line(analysis: dict[str, Any]) -> list[str]:
    """「证据：「…」」: the first quote found in the article (the first opportunity's first), shortened."""
    result = analysis.get("result_json")
    checks = result.get("checks") if isinstance(result, dict) else None
    quotes = checks.get("quotes") if isinstance(checks, dict) else None
    found = [q for q in quotes if isinstance(q, dict) and q.get("verified") is True and isinstance(q.get("quote"), str)
             and q["quote"].strip()] if isinstance(quotes, list) else []
    if not found:
        return []
    best = min(found, key=lambda q: q.get("opportunity") if isinstance(q.get("opportunity"), int) else 99)
    text = " ".join(best["quote"].split())
    return [f"证据：「{text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + '…'}」"]


def call_line(analysis: dict[str, Any]) -> str:
    """``82 分｜看多｜行业``: the score, and the first opportunity's direction and type (the analysis's type
    when it names no opportunity)."""
    opportunities = _opportunities(analysis)
    first = opportunities[0] if opportunities else {}
    parts = [f"{analysis['score']} 分"]
    if isinstance(first.get("direction"), str):
        parts.append(direction_label(first["direction"]))
    parts.append(type_label(str(first.get("type") or analysis.get("top_type") or "")))
    return "｜".join(parts)


def _when(moment: Any, day: date) -> str:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        return ""
    local = moment.astimezone(SHANGHAI)
    return f"{local:%H:%M}" if local.date() == day else f"{local:%m-%d %H:%M}"


def watch_hits(analysis: dict[str, Any]) -> list[str]:
    hits = analysis.get("watch_hits")
    return [h for h in hits if isinstance(h, str) and h] if isinstance(hits, list) else []


def account_name(name: Any) -> str:
    """An account's name as a push shows it: at most ACCOUNT_CHARS characters."""
    text = " ".join(str(name or "").split())
    return text if len(text) <= ACCOUNT_CHARS else text[: ACCOUNT_CHARS - 1] + "…"


def opportunity_block(entry: events.Entry, sources: Sequence[str], day: date, link: str = "",
                      moves: Sequence[str] = (), standing: str = "") -> Block:
    """One opportunity of a slot's push: the thesis (marked when its evidence is not in its article), the call
    and the reader's watchlist hits, the targets and their ``moves`` since the article (context.py), a quote,
    the account with its ``standing`` (standing.py) and time, how many accounts reported it."""
    lead = entry.lead
    watched = watch_hits(lead)
    head = first_sentence(lead.get("summary"), THESIS_CHARS) + ("" if verified(lead) else UNVERIFIED)
    call = call_line(lead) + ("｜★ " + watch_line(watched)[0] if watched else "")
    posted = " · ".join(p for p in (account_name(lead.get("mp_name")), _when(lead.get("published_at"), day)) if p)
    posted = "｜".join(p for p in (posted + " 发布" if posted else "", standing) if p)
    lines = [call, *targets_line(lead), *moves, *quote_line(lead), *([posted] if posted else []),
             *sources_line([account_name(s) for s in sources])]
    return Block(head, tuple(lines), link)


def slot_items(candidates: Sequence[events.Entry], threshold: int, top_id: int | None,
               every: Sequence[events.Entry] = ()) -> list[events.Entry]:
    """The entries a slot's push lists: its opportunities not pushed before (rank order, the reader's watchlist
    hits first), or, a forced push without any, the one it pushes (of ``every`` event of the slot)."""
    listed = [e for e in candidates if is_opportunity(e.lead, threshold)]
    if not listed:
        listed = [e for e in [*candidates, *every] if e.lead["id"] == top_id][:1]
    return sorted(listed, key=lambda e: not watch_hits(e.lead))


def event_sources(entry: events.Entry, others: Iterable[dict[str, Any]]) -> list[str]:
    """The accounts that wrote about ``entry``'s event, its own analyses' first, then other slots'."""
    mine = {m["id"] for m in entry.members}
    earlier = [o.get("mp_name") or "" for o in others if events.event_of(o) == entry.event and o["id"] not in mine]
    return [s for s in dict.fromkeys([*entry.sources, *earlier]) if s]


# ------------------------------------------------------------------------------------------- the 22:00 glance


def day_items(digest_json: Any, entries: Sequence[events.Entry], threshold: int, limit: int = MAX_DAY_ITEMS
              ) -> list[events.Entry]:
    """The day's top opportunities: the report's picks first (its order; day_block marks them), then the day's
    other opportunities by score (by rank between equal scores), up to ``limit``, one per event."""
    entry_of = {m["id"]: e for e in entries for m in e.members}
    chosen: list[events.Entry] = []
    for analysis_id in top_analysis_ids(digest_json):
        entry = entry_of.get(analysis_id)
        if entry is not None and entry not in chosen:
            chosen.append(entry)
    others = [e for e in entries if e not in chosen and is_opportunity(e.lead, threshold)]
    return (chosen + sorted(others, key=lambda e: -int(e.lead["score"])))[:limit]


def day_block(entry: events.Entry, digest_json: Any, link: str = "") -> Block:
    """One of the day's top opportunities: its one line (the report's title for it, else the article's), marked
    PICK when the report picked it, how many accounts reported it and, for news an earlier day's push told
    (store.with_pushes), which slot did; its score, direction, type and targets; its verified quote where the
    channel's size leaves room (a spare line: message.fitted)."""
    lead = entry.lead
    titles = {t.get("analysis_id"): t.get("title") for t in (digest_json or {}).get("top_opportunities") or []
              if isinstance(t, dict)} if isinstance(digest_json, dict) else {}
    title = next((titles[m["id"]] for m in entry.members if isinstance(titles.get(m["id"]), str)), None)
    sources = [s for s in entry.sources if s]
    pushed = next((m.get("pushed") for m in entry.members if m.get("follow_up")), None)
    picked = any(m["id"] in top_analysis_ids(digest_json) for m in entry.members)
    head = "· " + (PICK if picked else "") + first_sentence(title or lead.get("title") or lead.get("summary"), 40) + (
        f"（{len(sources)} 个公众号报道）" if len(sources) > 1 else "") + (f"（后续报道：{pushed} 已推送）" if pushed else "")
    targets = targets_line(lead)
    return Block(head, ("｜".join([call_line(lead), *targets]),), link, tuple(quote_line(lead)))


def failures_line(failures: Sequence[dict[str, Any]], limit: int = 2) -> list[str]:
    """「未能分析 3 篇：《…》《…》等」: the day's articles whose analysis failed, when there are any."""
    titles = [first_sentence(str(f.get("title") or ""), 20) for f in failures]
    if not titles:
        return []
    named = "".join(f"《{t}》" for t in titles[:limit] if t)
    return [f"未能分析 {len(titles)} 篇" + (f"：{named}" if named else "") + ("等" if len(titles) > limit else "")]


def record_line(group: outcomes.Group, horizon: int = RECORD_HORIZON) -> list[str]:
    """The track record in one line, only when it has the sample the record page concludes from: its hit
    rate and 95 % interval at ``horizon`` over all picks, as the page writes them."""
    if not group.conclusive or group.hit_rate is None:
        return []
    low, high = group.hit_interval
    return [f"战绩：T+{horizon} 命中率 {_pct(group.hit_rate)}（{_pct(low)}–{_pct(high)}），样本 {group.directional} 条"
            "（过往判断的记录，不是投资建议）"]


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"
