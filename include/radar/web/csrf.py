"""Every write of the pages comes from the pages themselves: a form token bound to the user, and what the
browser says about where the request came from.

The profile form's token (field ``csrf``) is an HMAC (signing.py) over the Airflow user, with an expiry: another
site cannot read it, another user cannot use it, a leaked one expires. Its key comes from ``link_secret``, else
from a random key kept in the radar's database (made at init, since the pages' own login may not write it;
without it the profile is read-only and a save a 503: :class:`FormKeyMissing`). Every POST is also checked for
where it came from (``Sec-Fetch-Site``, ``Origin``: :func:`check_same_origin`). The rules: docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

import psycopg
from fastapi import Request

from include.radar import store
from include.radar.core import signing
from include.radar.core.settings import Settings
from include.radar.web.auth import PageError

log = logging.getLogger(__name__)

FORM_TOKEN_HOURS = 12
FORM_KEY_STATE = store.state.FORM_KEY_STATE
_PURPOSE = "profile-form:"  # page paths start with "/", votes with "feedback:": no token is another's
_TOKEN_RE = re.compile(r"([0-9]{1,12})\.([0-9a-f]{64})")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


# ------------------------------------------------------------------------------------------- the form token


class FormKeyMissing(PageError):
    """The form's key is not in the database and the pages' login may not make it (a deployment whose init
    has not run ``cli grant-pages`` since, or a restore without it): saving is impossible until it has."""

    def __init__(self) -> None:
        super().__init__(503, "暂时无法保存关注设置", FORM_KEY_MISSING)


FORM_KEY_MISSING = ("机会雷达数据库里还没有关注设置表单的密钥，页面的数据库账号无权生成它。请运营者重新运行 airflow-init"
                    "（或以雷达数据库属主身份运行 python -m include.radar.cli grant-pages），或设置 "
                    "AIRFLOW_VAR_RADAR_LINK_SECRET，然后再保存。")


def form_key(resources: Any, settings: Settings) -> str:
    """The key of the profile form's tokens (see the module's docstring); blocking (may ask the database).

    Without ``link_secret`` the key is read from the database: init makes it as the radar's owner (roles.py),
    a single-login install (``make run``, the tests) makes it on first use. Raises :class:`FormKeyMissing`
    when it is not there and this login may not make it."""
    if settings.link_secret is not None:
        secret = settings.link_secret.get_secret_value().encode()
        return hmac.new(secret, b"radar profile form key", hashlib.sha256).hexdigest()

    def make() -> str:
        with resources.connect() as conn:
            row = store.state.get_state(conn, FORM_KEY_STATE)
        if row is not None:
            return str(row["value"])
        try:
            with resources.connect_write() as conn:
                return str(store.state.ensure_state(conn, FORM_KEY_STATE, secrets.token_hex(32)))
        except psycopg.errors.InsufficientPrivilege:
            log.error("the profile form's key (service_state %s) is missing and the pages' login may not make "
                      "it: run `python -m include.radar.cli grant-pages` as the owner (airflow-init does)",
                      FORM_KEY_STATE)
            raise FormKeyMissing() from None

    return resources.kept(FORM_KEY_STATE, make)


class UnknownUser(PageError):
    """The Airflow user's id or name cannot be read: no token is made for them, none is accepted."""

    def __init__(self) -> None:
        super().__init__(403, "无法确认你的 Airflow 账号", USER_UNKNOWN, airflow_home=True)


USER_UNKNOWN = "读取你的 Airflow 账号（编号、用户名）时出错，关注设置只能查看、不能保存。请重新登录 Airflow 后再试。"


def user_identity(user: Any) -> str:
    """Who the token is for: the Airflow user's id and name (an auth manager's user has both; a stand-in
    may have only a ``username``), each named and percent-quoted before they are joined, so that no id and
    name can pass for another's (``1`` + ``a/b`` is not ``1/a`` + ``b``). A part that is there but cannot be
    read, or no identity at all, raises UnknownUser: a token that binds nobody would bind everybody."""
    parts = []
    for attr in ("get_id", "get_name"):
        method = getattr(user, attr, None)
        if callable(method):
            try:
                value = str(method())
            except Exception:  # any failure to read who this is refuses
                raise UnknownUser() from None
            parts.append(f"{attr}={quote(value, safe='')}")
    username = str(getattr(user, "username", "") or "")
    if not parts and username:
        parts.append(f"username={quote(username, safe='')}")
    if not parts:
        raise UnknownUser()
    return "&".join(parts)


def form_token(key: str, user: Any, now: datetime) -> str:
    expires = int((now + timedelta(hours=FORM_TOKEN_HOURS)).timestamp())
    query = signing.sign_until(_PURPOSE + user_identity(user), key, expires)
    return f"{query['exp']}.{query['sig']}"


def form_token_valid(token: str, key: str, user: Any, now: datetime) -> bool:
    """Whether ``token`` was made for ``user`` with ``key`` and has not expired; never raises."""
    match = _TOKEN_RE.fullmatch(token)
    if match is None:
        return False
    try:
        identity = user_identity(user)
    except UnknownUser:
        return False
    return signing.verify(_PURPOSE + identity, match.group(1), match.group(2), key, now,
                          FORM_TOKEN_HOURS / 24 + 1 / 1440)


# ------------------------------------------------------------------------------------------ where from


def _host(netloc: str, scheme: str | None) -> str | None:
    """``host[:port]`` lower-cased, the scheme's default port dropped (both when the scheme is unknown)."""
    netloc = netloc.strip().lower()
    if not netloc or any(c in netloc for c in "/\\@ \t"):
        return None
    host, colon, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    if not colon:
        return netloc
    if not port.isdigit():
        return None
    if port in ((_DEFAULT_PORTS[scheme],) if scheme in _DEFAULT_PORTS else _DEFAULT_PORTS.values()):
        return host
    return f"{host}:{int(port)}"


def _origin_host(origin: str) -> str | None:
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or parts.path or parts.query or parts.fragment:
        return None
    return _host(parts.netloc, parts.scheme)


def own_hosts(request: Request, settings: Settings) -> set[str]:
    """The names this app is reached by: the request's Host (and a proxy's X-Forwarded-Host), and the host
    of the configured public address (``report_base_url``)."""
    names = [request.headers.get("host", ""), request.headers.get("x-forwarded-host", "").split(",")[0]]
    public = urlsplit(settings.report_base_url)
    hosts = {_host(n, None) for n in names if n} | {_host(public.netloc, public.scheme)}
    return {h for h in hosts if h}


def _foreign() -> PageError:
    return PageError(403, "请求来源无效",
                     "这个修改请求不是从机会雷达自己的页面发出的（可能来自其它网站），已拒绝。请在机会雷达的页面上重新操作。")


def check_same_origin(request: Request, settings: Settings) -> None:
    """Refuse a write that a browser says came from another site (Sec-Fetch-Site) or another origin (Origin).

    ``Origin: null`` says nothing either way: the pages' own forms send it (their referrer policy is
    ``no-referrer``, which keeps link signatures from leaking, and makes browsers hide the origin of a POST),
    and so can any page that wants to hide where it is. Then ``Sec-Fetch-Site`` decides (every current
    browser sends it), and without it, the token.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in ("same-origin", "none"):
        raise _foreign()
    origin = request.headers.get("origin")
    if origin is not None and origin.strip() != "null" and _origin_host(origin) not in own_hosts(request, settings):
        raise _foreign()
