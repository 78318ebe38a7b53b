"""Text that PostgreSQL can store, text that reads in the order it is written, and spans of time as a reader
says them. Pure.

PostgreSQL's ``text`` and ``jsonb`` reject the NUL character, and a lone UTF-16 surrogate (which JSON's
``"\\ud800"`` escape decodes to in Python) cannot be encoded as UTF-8 at all: either one in an outside string
makes the insert fail. Outside rows with such a field are refused (:func:`unstorable`); free text that the
radar keeps anyway, such as an LLM's summary, is made storable (:func:`storable`).

Whatever an article or the LLM wrote is shown (in every push form and on every page) without the characters
that reorder or reshape the rest of its line (:func:`in_order`).
"""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE_RE = re.compile(r"[\x00\ud800-\udfff]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """What makes ``text`` unstorable ("NUL", "lone surrogate"), or None when it is fine."""
    match = _UNSTORABLE_RE.search(text)
    if match is None:
        return None
    return "NUL character" if match.group(0) == "\x00" else "lone surrogate"


def storable(text: str) -> str:
    """``text`` without NUL characters, lone surrogates replaced by U+FFFD."""
    if _UNSTORABLE_RE.search(text) is None:
        return text
    return _SURROGATE_RE.sub("\ufffd", text.replace("\x00", ""))


def storable_json(value: Any) -> Any:
    """A JSON value (dicts, lists, strings, numbers) with every string, keys included, made storable."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable_json(v) for v in value]
    return value


# what reorders or reshapes the text after it rather than showing itself, so that an unclosed one in a name
# makes 「中微公司 688012」 read 「210886 司公微中」 and 37% read %73: the bidirectional embeddings, overrides and
# isolates (U+202A–202E, U+2066–2069), the invisible strong marks (LRM, RLM, the Arabic letter mark U+061C and
# the Syriac abbreviation mark U+070F, an invisible right-to-left letter), the deprecated format controls
# U+206A–206F (symmetric swapping, Arabic shaping, national digit shapes) and the interlinear annotation marks
# U+FFF9–FFFB (a renderer hides the text between them). Joiners (the ZWJ of a family emoji), variation
# selectors and tags (emoji flags) only join or pick glyphs: they stay.
_REORDERING_RE = re.compile("[\u061c\u070f\u200e\u200f\u202a-\u202e\u2066-\u206f\ufff9-\ufffb]")


def in_order(text: str) -> str:
    """``text`` without a character that changes how the rest of its line reads (reverses, reorders or reshapes
    it): what an article or the LLM wrote reads in the order it was written, in every push form and page."""
    return _REORDERING_RE.sub("", text)


def span(seconds: float) -> str:
    """A wall-clock span as people say it: ``45 秒``, ``12 分钟``, ``1 小时 5 分``, ``2 天 3 小时``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{max(seconds, 0)} 秒"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} 分钟"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} 小时 {minutes} 分" if minutes else f"{hours} 小时"
    days, hours = divmod(hours, 24)
    return f"{days} 天 {hours} 小时" if hours else f"{days} 天"
