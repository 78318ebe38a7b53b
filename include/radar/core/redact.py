"""Secrets never leave their box: scrubbing text that is stored, shown on a page or logged.

Two nets. The exact values the process knows are secret (API keys, passwords, push channel tokens, the link
secret: :func:`register`, called where they are loaded) are replaced wherever they appear, and handed to
Airflow's own log masker when running in a task. Shapes that are secret whatever their value (an
``Authorization`` header, ``Bearer``/``AK-SK`` credentials, ``sk-…`` keys, ``password=…``, ``sig=…``, the
password of a ``scheme://user:password@host`` URL) are replaced by pattern, so a secret the process was never
told about is still caught in an error message.
"""

from __future__ import annotations

import logging
import re
import threading

MASK = "***"
# shorter values would also match ordinary words
MIN_SECRET_CHARS = 6

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(?:bearer|basic|ak-sk)\s+)?[^\s,;'\"]+"), r"\1" + MASK),
    (re.compile(r"(?i)\b(bearer|ak-sk)\s+[A-Za-z0-9._~+/=:-]+"), r"\1 " + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), "sk-" + MASK),
    (re.compile(
        r"(?i)\b(password|passwd|pwd|secret|secret_key|access_key|api[_-]?key|apikey|token|access_token|sig)"
        r"(\"?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s&,;'\")]+)"
    ), r"\1\2" + MASK),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):[^@\s/]*@"), r"\1:" + MASK + "@"),
)

_lock = threading.Lock()
_secrets: set[str] = set()


def register(*values: str | None) -> None:
    """Remember values that are secret wherever they turn up (and tell Airflow's log masker in a task)."""
    fresh = [v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS and v not in _secrets]
    if not fresh:
        return
    with _lock:
        _secrets.update(fresh)
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # plain Python: our own scrubbing is the only net
        return
    for value in fresh:
        mask_secret(value)


def scrub(text: str | None) -> str:
    """``text`` with every registered secret and every secret-shaped fragment replaced by ``***``."""
    if not text:
        return text or ""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class ScrubFilter(logging.Filter):
    """Scrubs every record of the logger it is attached to (its message is formatted once, then scrubbed)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def scrub_logger(name: str) -> None:
    """Attach :class:`ScrubFilter` to the logger ``name`` once (a filter sees only that logger's own records)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, ScrubFilter) for f in logger.filters):
        logger.addFilter(ScrubFilter())
