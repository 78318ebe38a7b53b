"""Signed report links: a pushed link opens on a phone without an Airflow login.

The signature is an HMAC-SHA256 over the page path and the expiry, with a secret from configuration
(``AIRFLOW_VAR_RADAR_LINK_SECRET``). It grants read access to that one path until it expires; any other
path, a changed expiry or a changed signature fails verification.

Verification accepts only what :func:`sign` writes: ``exp`` a plain decimal integer of at most 12 digits that
is not past and not further ahead than any link is ever signed for, ``sig`` exactly 64 lowercase hex digits.
Anything else (other digit scripts, signs, spaces, non-ASCII text, a year-10^22 expiry) is simply "not
valid": it never reaches the integer parser, the HMAC comparison or a date conversion that could raise.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import datetime, timedelta
from urllib.parse import urlencode

# Links are signed for at most ``remember_me_days`` (<= 31, settings.py); the margin absorbs clock skew
# between the worker that signed and the api-server that checks. A link signed for longer (before that bound
# existed: up to 366 days) is refused. The pages check the tighter bound of the current setting (web/auth.py).
MAX_VALID_DAYS = 32
_EXP_RE = re.compile(r"[0-9]{1,12}")
_SIG_RE = re.compile(r"[0-9a-f]{64}")


def _mac(secret: str, path: str, expires: int) -> str:
    # surrogatepass: a path decoded from hostile bytes may hold a lone surrogate; it must not raise here
    message = f"{path}\n{expires}".encode("utf-8", "surrogatepass")
    return hmac.new(secret.encode("utf-8", "surrogatepass"), message, hashlib.sha256).hexdigest()


def sign(path: str, secret: str, now: datetime, valid_days: int) -> dict[str, str]:
    """Query parameters (``exp``, ``sig``) that grant access to ``path`` for ``valid_days``."""
    expires = int((now + timedelta(days=valid_days)).timestamp())
    return {"exp": str(expires), "sig": _mac(secret, path, expires)}


def sign_until(path: str, secret: str, expires: int) -> dict[str, str]:
    """Query parameters (``exp``, ``sig``) that grant ``path`` until the Unix time ``expires`` (an action
    that must expire with the page that rendered it)."""
    return {"exp": str(int(expires)), "sig": _mac(secret, path, int(expires))}


def parse_exp(exp: str | None, now: datetime, max_days: float = MAX_VALID_DAYS) -> int | None:
    """``exp`` as a Unix time when it is written as the signer writes it and lies in the valid window: not
    past, and at most ``max_days`` (never more than MAX_VALID_DAYS) ahead."""
    if exp is None or not _EXP_RE.fullmatch(exp):
        return None
    expires = int(exp)
    if not now.timestamp() <= expires <= now.timestamp() + min(max_days, MAX_VALID_DAYS) * 86400:
        return None
    return expires


def verify(
    path: str, exp: str | None, sig: str | None, secret: str | None, now: datetime, max_days: float = MAX_VALID_DAYS
) -> bool:
    if not (secret and exp and sig) or not _SIG_RE.fullmatch(sig):
        return False
    expires = parse_exp(exp, now, max_days)
    if expires is None:
        return False
    return hmac.compare_digest(_mac(secret, path, expires), sig)  # both ASCII hex: compare_digest cannot raise


def page_url(base_url: str, path: str, secret: str | None, now: datetime, valid_days: int) -> str:
    """Absolute URL of a report page under ``base_url``; signed when a secret is configured.

    ``path`` is relative to the report app (``/daily/2026-01-08``); the signature covers exactly it.
    """
    url = base_url.rstrip("/") + path
    if not secret:
        return url
    return f"{url}?{urlencode(sign(path, secret, now, valid_days))}"
