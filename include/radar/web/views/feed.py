"""The reader's Atom feed (``/feed.atom``, web/routes/feed.py) as Atom 1.0 bytes, written by feedgen (pure).

One entry per pushed event: each opportunity an opportunity push told of (its event's id, so a rerun or a
rewrite joining the event keeps the entry; ``updated`` when the event gains an analysis) and each day's report
whose push went out. An entry says what its push said (briefs.py: the score, direction, type, targets with
their codes, the verified quote, account and time, how many accounts) as text, defanged like the push
(decide.defang) and with what XML cannot hold dropped; feedgen (lxml) escapes the rest. The links are the
radar's own, signed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from include.radar.core.slots import SHANGHAI
from include.radar.pushes import briefs, events
from include.radar.pushes.decide import daily_title, defang

MAX_ENTRIES = 50
FEED_TITLE = "机会雷达"
ID_PREFIX = "tag:opportunity-radar,2026:"
# what XML 1.0 cannot carry at all (lxml refuses it): C0 controls but tab and newlines, lone surrogates, U+FFFE/F
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: Any) -> str:
    """``text`` defanged as the push writes it, without the characters XML 1.0 cannot hold."""
    return _NOT_XML.sub("", defang(str(text or "")))


@dataclass(frozen=True)
class FeedEntry:
    """One entry: its stable id, title, text, signed link, when it was pushed and when it last changed."""

    id: str
    title: str
    text: str
    link: str
    published: datetime
    updated: datetime
    author: str = FEED_TITLE
    category: str = ""


def opportunity_entry(row: dict[str, Any], members: Sequence[dict[str, Any]], link: str) -> FeedEntry:
    """An opportunity push's item (store.feeds.pushed_analyses' row) with the other analyses of its event."""
    others = [m for m in members if m["id"] != row["id"]]
    entry = events.Entry(row, [row, *others])
    pushed = row["pushed_at"]
    block = briefs.opportunity_block(entry, entry.sources, pushed.astimezone(SHANGHAI).date(), link)
    changed = max(pushed, row.get("changed_at") or pushed)
    return FeedEntry(id=f"{ID_PREFIX}event/{row['event']}", title=xml_text(block.head), link=link,
                     text="\n".join(xml_text(line) for line in block.lines), published=pushed, updated=changed,
                     author=xml_text(row.get("mp_name")) or FEED_TITLE, category="opportunity")


def report_entry(row: dict[str, Any], link: str) -> FeedEntry:
    """A day's report whose push went out (store.feeds.pushed_reports' row): its title and counts as pushed."""
    stats = row["stats"] if isinstance(row.get("stats"), dict) else {}
    day: date = row["report_date"]
    count = lambda name: stats.get(name) if isinstance(stats.get(name), int) else 0  # noqa: E731
    text = f"分析 {count('analysed')} 篇，机会 {count('opportunities')} 条，失败 {count('failed')} 篇"
    max_score = stats.get("max_score") if isinstance(stats.get("max_score"), int) else None
    return FeedEntry(id=f"{ID_PREFIX}daily/{day.isoformat()}", title=xml_text(daily_title(day, count("opportunities"), max_score)),
                     text=text, link=link, published=row["pushed_at"],
                     updated=max(row["pushed_at"], row.get("updated_at") or row["pushed_at"]), category="daily")


def newest(entries: Sequence[FeedEntry], limit: int = MAX_ENTRIES) -> list[FeedEntry]:
    """The latest ``limit`` entries, newest push first (ties by id: the order never changes between reads)."""
    return sorted(entries, key=lambda e: (e.published, e.id), reverse=True)[:limit]


def last_change(entries: Sequence[FeedEntry], empty_since: datetime) -> datetime:
    """When the feed last changed: its latest entry's ``updated`` (``empty_since`` when it has none)."""
    return max((e.updated for e in entries), default=empty_since)


def atom(entries: Sequence[FeedEntry], *, self_url: str, home_url: str, updated: datetime) -> bytes:
    """The feed document (``updated``: :func:`last_change`); the same entries give the same bytes, which the
    route's ETag relies on."""
    from feedgen.feed import FeedGenerator  # lxml and feedgen: paid by the feed's requests only

    feed = FeedGenerator()
    feed.id(f"{ID_PREFIX}feed")
    feed.title(FEED_TITLE)
    feed.subtitle("推送过的机会与每日日报")
    feed.author({"name": FEED_TITLE})
    feed.link(href=self_url, rel="self", type="application/atom+xml")
    feed.link(href=home_url, rel="alternate", type="text/html")
    feed.language("zh-CN")
    feed.generator("Opportunity Radar")
    feed.updated(updated.astimezone(UTC))
    for item in entries:
        add = feed.add_entry(order="append")
        add.id(item.id)
        add.title(item.title or "（无标题）")
        add.link(href=item.link, rel="alternate", type="text/html")
        add.published(item.published.astimezone(UTC))
        add.updated(item.updated.astimezone(UTC))
        add.author({"name": item.author})
        add.content(item.text, type="text")
        if item.category:
            add.category(term=item.category)
    document: bytes = feed.atom_str(pretty=True)
    return document

