"""The query parameters of the pages with filters (search, the track record): one reader, one set of bounds.

Every value is refused with a 400 page that says what is wrong, never a 500: a repeated key, a control
character (a NUL cannot even reach the database), a page number or a date that is not one. The checks run on
the text before it becomes a number or a date: Python refuses to parse an integer of more than 4,300 digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Any

from include.radar.web.auth import PageError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
Refusal = Callable[[str], PageError]  # a message for the reader → the page's own 400


def one(params: Any, name: str, bad: Refusal) -> str:
    """The single value of ``name`` (empty when absent), stripped."""
    values = params.getlist(name)
    if len(values) > 1:
        raise bad(f"参数 {name} 重复。")
    value = values[0] if values else ""
    if _CONTROL.search(value):
        raise bad(f"参数 {name} 含有控制字符。")
    return value.strip()


def page_number(text: str, max_page: int, bad: Refusal) -> int:
    """The page a ``page`` value names ("" is the first): 1 to ``max_page``, written in ASCII digits."""
    text = text or "1"
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(max_page)) and 1 <= int(text) <= max_page):
        raise bad(f"页码应为 1 到 {max_page} 的整数。")
    return int(text)


def filter_day(value: str, what: str, bad: Refusal, first: date | None = None, last: date | None = None) -> str:
    """A ``YYYY-MM-DD`` filter date as ISO text, or empty; between ``first`` and ``last`` when given (the
    pages' own range: date arithmetic on it never leaves ``date``'s)."""
    if not value:
        return ""
    try:
        day = date.fromisoformat(value) if len(value) == 10 and value.isascii() else None
    except ValueError:
        day = None
    if day is None:
        raise bad(f"{what}应为 YYYY-MM-DD 格式的日期。")
    if (first is not None and day < first) or (last is not None and day > last):
        raise bad(f"{what}应在 {first or date.min} 到 {last or date.max} 之间。")
    return day.isoformat()
