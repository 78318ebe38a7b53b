"""The environment files of the one-host deployment (``/etc/opportunity-radar/*.env``), read as systemd reads an
``EnvironmentFile=``, so that a command typed by hand sees what the units see.

A shell's ``set -a; . tasks.env`` is not that reading: an unquoted JSON connection loses its quotes there,
``<`` starts a redirection, ``$`` expands. systemd's grammar (systemd.exec(5), "EnvironmentFile="): blank lines
and lines starting with ``#`` or ``;`` are comments; ``KEY=VALUE`` with blanks around the key and before the
value ignored, trailing blanks of an unquoted value dropped; a value is taken literally except that a
backslash escapes the next character (a backslash at the end of a line continues it); a value may start with
``'…'`` (literal) or ``"…"`` (where ``\\"``, ``\\\\``, ``\\$`` and ``\\``` are escapes). Quotes inside an unquoted
value, as in JSON, are kept.
"""

from __future__ import annotations

import re
from pathlib import Path

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOUBLE_QUOTE_ESCAPES = '"\\`$'


class EnvFileError(ValueError):
    """A line systemd would not read as an assignment: the message names the file and the line."""


def read(path: Path) -> dict[str, str]:
    """The variables ``path`` assigns, in order; a later assignment of a name wins, as in systemd."""
    return parse(path.read_text(encoding="utf-8"), path)


def parse(text: str, path: Path | str) -> dict[str, str]:
    """The variables ``text`` (the file ``path``, named in errors) assigns."""
    found: dict[str, str] = {}
    for number, line in _logical_lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        key, equals, value = stripped.partition("=")
        key = key.strip()
        if not equals or not _KEY.fullmatch(key):
            raise EnvFileError(f"{path}, line {number}: not KEY=VALUE: {stripped[:40]!r}")
        found[key] = _value(value.lstrip())
    return found


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with a trailing backslash joined to the next (outside comments), each with its first line's number."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if pending is None and line.lstrip()[:1] in ("#", ";"):
            lines.append((number, line))
            continue
        start, head = pending or (number, "")
        joined = head + line
        if _continues(joined):
            pending = (start, joined[:-1])
        else:
            lines.append((start, joined))
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _continues(line: str) -> bool:
    """Ends in a backslash that is not itself escaped."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _value(raw: str) -> str:
    out: list[str] = []
    i, quote, quoted_last = 0, None, False
    while i < len(raw):
        c = raw[i]
        if quote == "'":
            if c == "'":
                quote, quoted_last = None, True
            else:
                out.append(c)
        elif quote == '"':
            if c == '"':
                quote, quoted_last = None, True
            elif c == "\\" and i + 1 < len(raw):
                i += 1
                out.append(raw[i] if raw[i] in _DOUBLE_QUOTE_ESCAPES else "\\" + raw[i])
            else:
                out.append(c)
        elif c in "'\"" and (not out or quoted_last):
            quote = c  # a quote opens only where a value (or a quoted part of it) starts
        elif c == "\\" and i + 1 < len(raw):
            i += 1
            out.append(raw[i])
            quoted_last = False
        else:
            out.append(c)
            quoted_last = False
        i += 1
    if quote is not None:
        raise EnvFileError(f"a value opens {quote} and never closes it: {raw[:40]!r}")
    return "".join(out) if quoted_last else "".join(out).rstrip()
