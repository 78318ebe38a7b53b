"""What the analysis page shows of an analysis's checks: each evidence quote verified or not,
the sentence a verified one came from (an anchor on the page), and a resolved score/flag contradiction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape


@dataclass(frozen=True)
class Quote:
    text: str
    verified: bool | None  # None: analysed before quotes were checked
    anchor: str | None = None  # id of its place in the 原文出处 section
    context: Markup | None = None  # the sentence, the quote marked (escaped)


@dataclass(frozen=True)
class Trust:
    checked: bool
    verified: int
    unverified: int
    consistency: str | None
    sources: list[Quote]  # verified quotes in article order, for the 原文出处 section

    @property
    def blocks_push(self) -> bool:
        return self.checked and self.verified == 0 and self.unverified > 0


def _marked(context: str, quote_text: str, start: int | None, end: int | None, article: str | None) -> Markup:
    """The context with the quoted part wrapped in <mark>, everything escaped."""
    exact = article[start:end] if article is not None and start is not None and end is not None else None
    if exact and exact in context:
        before, _, after = context.partition(exact)
        return escape(before) + Markup("<mark>") + escape(exact) + Markup("</mark>") + escape(after)
    return escape(context)


def trust_view(result_json: Any, consistency_note: str | None, article: str | None = None) -> tuple[Trust, dict[str, Quote]]:
    """The page's view of ``result_json["checks"]``, and each quote's view by its text (for the opportunities)."""
    checks = result_json.get("checks") if isinstance(result_json, dict) else None
    if not isinstance(checks, dict):
        return Trust(False, 0, 0, consistency_note, []), {}
    by_text: dict[str, Quote] = {}
    sources: list[tuple[int, Quote]] = []
    for i, q in enumerate(c for c in checks.get("quotes") or [] if isinstance(c, dict)):
        text = str(q.get("quote") or "")
        if q.get("verified"):
            start = q.get("start") if isinstance(q.get("start"), int) else None
            view = Quote(text, True, f"evidence-{i + 1}",
                         _marked(str(q.get("context") or text), text, start, q.get("end"), article))
            sources.append((start or 0, view))
        else:
            view = Quote(text, False)
        by_text.setdefault(text, view)
    trust = Trust(True, int(checks.get("verified") or 0), int(checks.get("unverified") or 0),
                  consistency_note or checks.get("consistency"), [v for _, v in sorted(sources, key=lambda s: s[0])])
    return trust, by_text
