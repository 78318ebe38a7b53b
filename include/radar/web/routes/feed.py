"""The reader's Atom feed (``/feed.atom``) and its token, made, rotated and revoked from the profile page
(``POST /profile/feed``).

The feed opens with a long-lived token of its own, never an Airflow session: ``?feed=<key>&sig=<hmac>``, the key
one of ``feed_token``'s (one live per Airflow user) and ``sig`` its HMAC under ``link_secret`` (signing.py), so
a guessed or altered URL costs no database read and a revoked key opens nothing (401). ``sig`` is what the
per-link bound counts (web/admission.py) and what the access logs redact (web/server.py). Entries: the views'
(web/views/feed.py); their links are signed like a push's, with an expiry that changes once a day, so that a
feed reader's conditional GET (ETag, Last-Modified) is answered 304 while nothing was pushed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response

from include.radar import store
from include.radar.core import signing
from include.radar.core.settings import Settings
from include.radar.web import csrf
from include.radar.web.auth import PageError, Reader, ReaderDep, user_name
from include.radar.web.inputs import read_body
from include.radar.web.pages import page_links
from include.radar.web.resources import get_resources, zone
from include.radar.web.views import feed as feed_views

PURPOSE = "feed:"  # page paths start with "/", sessions "read-session:", votes "feedback:": no MAC is another's
FEED_PATH = "/feed.atom"
_KEY_RE = re.compile(r"[0-9a-f]{32}")
_SIG_RE = re.compile(r"[0-9a-f]{64}")
MEDIA_TYPE = "application/atom+xml; charset=utf-8"
MAX_FORM_BODY = 4096
EMPTY_SINCE = datetime(2026, 1, 1, tzinfo=UTC)  # the ``updated`` of a feed nothing was pushed to yet

router = APIRouter()
profile = APIRouter()

REFUSED = ("订阅链接无效或已停用", "这个订阅链接不正确，或已在关注设置页面停用、更换。请登录 Airflow，在关注设置页面复制新的订阅链接。")
NO_SECRET = ("订阅未启用", "订阅源需要设置 AIRFLOW_VAR_RADAR_LINK_SECRET（链接签名密钥）后才能使用。")


def token_sig(secret: str, key: str) -> str:
    """The HMAC a feed URL carries for ``key``: signing.py's, over ``feed:<key>`` (it never expires; revoking
    the key or rotating ``link_secret`` ends it)."""
    return signing.sign_until(PURPOSE + key, secret, 0)["sig"]


def feed_url(settings: Settings, key: str) -> str | None:
    """The reader's feed URL under ``report_base_url``; None without a ``link_secret``."""
    if not settings.link_secret:
        return None
    query = urlencode({"feed": key, "sig": token_sig(settings.link_secret.get_secret_value(), key)})
    return f"{settings.report_base_url.rstrip('/')}{FEED_PATH}?{query}"


def _key_of(request: Request, settings: Settings) -> str:
    """The feed key of a well-formed URL whose signature verifies; else a 401 page (no database asked)."""
    params = request.query_params
    keys, sigs = params.getlist("feed"), params.getlist("sig")
    if not settings.link_secret:
        raise PageError(401, *NO_SECRET)
    if len(keys) != 1 or len(sigs) != 1 or not _KEY_RE.fullmatch(keys[0]) or not _SIG_RE.fullmatch(sigs[0]):
        raise PageError(401, *REFUSED)
    if not hmac.compare_digest(token_sig(settings.link_secret.get_secret_value(), keys[0]), sigs[0]):
        raise PageError(401, *REFUSED)
    return keys[0]


def _link_signer(settings: Settings, now: datetime) -> Any:
    """Absolute signed URLs for the entries' pages, expiring ``remember_me_days`` after today's start
    (Asia/Shanghai): the same all day, so the feed's bytes change only when its entries do."""
    secret = settings.link_secret.get_secret_value() if settings.link_secret else ""
    start = datetime.combine(now.astimezone(zone()).date(), datetime.min.time(), zone())
    expires = int((start + timedelta(days=settings.remember_me_days)).timestamp())
    base = settings.report_base_url.rstrip("/")
    return lambda path: f"{base}{path}?{urlencode(signing.sign_until(path, secret, expires))}"


def _document(request: Request) -> tuple[bytes, datetime]:
    """The feed of a verified token and when it last changed: 401 when the key was revoked (blocking: asks
    the database)."""
    resources = get_resources(request)
    settings = resources.settings()
    key = _key_of(request, settings)
    now = resources.clock.now()
    with resources.connect() as conn:
        if not store.feeds.token_is_live(conn, key):
            raise PageError(401, *REFUSED)
        pushed = store.feeds.pushed_analyses(conn, feed_views.MAX_ENTRIES)
        members = store.events.event_members(conn, list({r["event"] for r in pushed}))
        reports = store.feeds.pushed_reports(conn, feed_views.MAX_ENTRIES)
    sign = _link_signer(settings, now)
    by_event: dict[int, list[dict[str, Any]]] = {}
    for m in members:
        by_event.setdefault(m["event_id"], []).append(m)
    entries = [feed_views.opportunity_entry(r, by_event.get(r["event"], []), sign(f"/analysis/{r['id']}"))
               for r in pushed]
    entries += [feed_views.report_entry(r, sign(f"/daily/{r['report_date'].isoformat()}")) for r in reports]
    base, listed = settings.report_base_url.rstrip("/"), feed_views.newest(entries)
    changed = feed_views.last_change(listed, EMPTY_SINCE)
    return feed_views.atom(listed, self_url=feed_url(settings, key) or base + FEED_PATH, home_url=base + "/",
                           updated=changed), changed


def _not_modified(request: Request, etag: str, modified: datetime) -> bool:
    """Whether the reader's copy is current: its If-None-Match names this ETag (or ``*``), else, without one,
    its If-Modified-Since is not before the feed's last change; an unreadable header is no copy."""
    match = request.headers.get("if-none-match")
    if match is not None:
        return any(tag.strip().removeprefix("W/") in (etag, "*") for tag in match.split(","))
    since = request.headers.get("if-modified-since")
    if not since:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError, IndexError, OverflowError):
        return False
    return when.tzinfo is not None and modified <= when


@router.get(FEED_PATH, include_in_schema=False)
async def feed(request: Request) -> Response:
    """The reader's Atom feed; 401 for a URL that is not a live token's; 304 when the reader's copy is current."""
    document, changed = await run_in_threadpool(_document, request)
    modified = changed.astimezone(UTC).replace(microsecond=0)
    etag = '"' + hashlib.sha256(document).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Last-Modified": format_datetime(modified, usegmt=True),
               "Cache-Control": "private, no-cache"}
    if _not_modified(request, etag, modified):
        return Response(status_code=304, headers=headers)
    return Response(document, media_type=MEDIA_TYPE, headers=headers)


@profile.post("/profile/feed")
async def manage_feed(request: Request, reader: ReaderDep) -> Response:
    """Make or rotate (``action=rotate``) or revoke (``action=revoke``) the reader's own feed token: an Airflow
    user who may read the radar (never a link or its session), from this app's own page with the form's token."""
    if reader.user is None or reader.signed:
        raise PageError(401, "请登录后管理订阅", "订阅链接属于你的 Airflow 账号，登录 Airflow 后才能生成或停用。", login=True)
    resources = get_resources(request)
    settings = await run_in_threadpool(resources.settings)
    csrf.check_same_origin(request, settings)
    body = await read_body(request, MAX_FORM_BODY)
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        raise PageError(400, "请求无效", "提交的内容格式不正确。") from None
    action = (fields.get("action") or [""])[0]
    key = await run_in_threadpool(csrf.form_key, resources, settings)
    if action not in ("rotate", "revoke") or not csrf.form_token_valid(
            (fields.get("csrf") or [""])[0], key, reader.user, resources.clock.now()):
        raise PageError(403, "表单已过期", "请重新打开关注设置页面后再操作（表单校验失败）。")

    def write() -> None:
        with resources.connect_write() as conn:
            if action == "rotate":
                store.feeds.rotate_token(conn, user_name(reader.user), resources.clock.now())
            else:
                store.feeds.revoke_token(conn, user_name(reader.user), resources.clock.now())

    await run_in_threadpool(write)
    return RedirectResponse(page_links(request).profile() + "?feed=" + action, status_code=303)


FEED_NOTES = {"rotate": "已生成新的订阅链接，旧链接已失效。", "revoke": "订阅链接已停用。"}


def feed_panel(request: Request, reader: Reader, settings: Settings, conn: Any) -> dict[str, str]:
    """What the profile page shows of the reader's feed (blocking): the URL of their live token, the form that
    makes, rotates or revokes it (an Airflow login only), and what was just done."""
    note = FEED_NOTES.get(request.query_params.get("feed", ""), "")
    if reader.user is None or reader.signed:
        return {"url": "", "csrf": "", "action": "", "note": note}
    if not settings.link_secret:
        return {"url": "", "csrf": "", "action": "", "note": NO_SECRET[1]}
    resources = get_resources(request)
    try:
        token = csrf.form_token(csrf.form_key(resources, settings), reader.user, resources.clock.now())
    except (csrf.UnknownUser, csrf.FormKeyMissing):  # no form: the URL alone, if there is one
        token = ""
    live = store.feeds.live_token(conn, user_name(reader.user))
    return {"url": (feed_url(settings, live["key"]) or "") if live else "", "csrf": token,
            "action": page_links(request).profile() + "/feed", "note": note}
