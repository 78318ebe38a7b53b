"""Text that PostgreSQL can store. Pure.

PostgreSQL's ``text`` and ``jsonb`` reject the NUL character, and a lone UTF-16 surrogate (which JSON's
``"\\ud800"`` escape decodes to in Python) cannot be encoded as UTF-8 at all: either one in an outside string
makes the insert fail. Outside rows with such a field are refused (:func:`unstorable`); free text that the
radar keeps anyway, such as an LLM's summary, is made storable (:func:`storable`).
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
