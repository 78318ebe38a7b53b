"""Signed report links: a pushed link opens on a phone without an Airflow login.

The signature is an HMAC-SHA256 over the page path and the expiry, with a secret from configuration
(``AIRFLOW_VAR_RADAR_LINK_SECRET``). It grants read access to that one path until it expires; any other
path, a changed expiry or a changed signature fails verification.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta
from urllib.parse import urlencode


def _mac(secret: str, path: str, expires: int) -> str:
    message = f"{path}\n{expires}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(path: str, secret: str, now: datetime, valid_days: int) -> dict[str, str]:
    """Query parameters (``exp``, ``sig``) that grant access to ``path`` for ``valid_days``."""
    expires = int((now + timedelta(days=valid_days)).timestamp())
    return {"exp": str(expires), "sig": _mac(secret, path, expires)}


def verify(path: str, exp: str | None, sig: str | None, secret: str | None, now: datetime) -> bool:
    if not (secret and exp and sig):
        return False
    try:
        expires = int(exp)
    except ValueError:
        return False
    if expires < now.timestamp():
        return False
    return hmac.compare_digest(_mac(secret, path, expires), sig)


def page_url(base_url: str, path: str, secret: str | None, now: datetime, valid_days: int) -> str:
    """Absolute URL of a report page under ``base_url``; signed when a secret is configured.

    ``path`` is relative to the report app (``/daily/2026-01-08``); the signature covers exactly it.
    """
    url = base_url.rstrip("/") + path
    if not secret:
        return url
    return f"{url}?{urlencode(sign(path, secret, now, valid_days))}"
