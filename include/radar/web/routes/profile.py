"""The reader's focus (``/profile``): watchlist and include/exclude rules, read by anyone who may read the
radar, saved by an Airflow user only, with a double-submit CSRF token."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from include.radar import focus, store
from include.radar.web.auth import PageError, Reader, ReaderDep, require_reader
from include.radar.web.runtime import get_pages, get_runtime, page_links, read_body, user_name, zone
from include.radar.web.views import profile as profile_views

CSRF_COOKIE = "radar_csrf"
_CSRF_RE = re.compile(r"[A-Za-z0-9_-]{43}")
MAX_PROFILE_BODY = 64 * 1024

router = APIRouter(dependencies=[Depends(require_reader)])


@router.get("/profile", response_class=HTMLResponse)
def profile(request: Request, reader: ReaderDep) -> HTMLResponse:
    recheck = request.query_params.get("recheck", "")
    return _profile_response(request, reader, saved=request.query_params.get("saved") == "1",
                             recheck=int(recheck) if recheck.isdigit() and len(recheck) < 6 else 0)


@router.post("/profile", response_class=HTMLResponse)
async def save_profile(request: Request, reader: ReaderDep) -> Response:
    """Save the profile: an Airflow user only (a signed push link reads, never writes), with the form's
    CSRF token equal to its cookie (a form on another site can send the cookie, never read it)."""
    if reader.signed:
        raise PageError(403, "请登录后修改", "通过推送链接访问时只能查看关注设置，登录 Airflow 后才能修改。", login=True)
    body = await read_body(request, MAX_PROFILE_BODY)
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise PageError(400, "请求无效", "提交的内容格式不正确。") from None
    form = {k: v[0] for k, v in fields.items() if v}
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not (_CSRF_RE.fullmatch(cookie) and secrets.compare_digest(form.get("csrf", ""), cookie)):
        raise PageError(403, "表单已过期", "请重新打开关注设置页面后再保存（表单校验失败）。")
    typed = {name: form.get(name, "") for name in profile_views.FIELDS}
    try:
        # measured: a regex rule too costly for every article is refused here (off the event loop: RE2 runs
        # without the GIL, and the probes take well under a second whatever was typed)
        profile = await run_in_threadpool(lambda: focus.Profile.build(**{k: [v] for k, v in typed.items()},
                                                                      measure=True))
    except focus.ProfileError as exc:
        return await run_in_threadpool(
            _profile_response, request, reader, errors=exc.errors, typed=typed, status=400)
    lists = {"companies": list(profile.companies), "tickers": list(profile.tickers),
             "sectors": list(profile.sectors), "interests": list(profile.interests), "rules": profile.rule_lines()}

    def write() -> int:
        runtime = get_runtime(request)
        with runtime.connect_write() as conn:
            store.save_profile(conn, lists, user_name(reader.user))
            # the next slot applies the new rules to what the old ones excluded (never this request: its time
            # must not depend on how many articles there are); the page says how many it will look at
            return store.excluded_count(conn, runtime.clock() - timedelta(hours=focus.RECHECK_HOURS))

    recheck = await run_in_threadpool(write)
    return RedirectResponse(page_links(request).profile() + f"?saved=1&recheck={recheck}", status_code=303)


def _profile_response(request: Request, reader: Reader, *, saved: bool = False, errors: list[str] | None = None,
                      typed: dict[str, str] | None = None, status: int = 200, recheck: int = 0) -> HTMLResponse:
    runtime = get_runtime(request)
    settings = runtime.settings()
    links = page_links(request)
    with runtime.connect() as conn:
        current = focus.from_row(store.get_profile(conn))
        weights = runtime.ranking_weights(conn)
    cookie = request.cookies.get(CSRF_COOKIE, "")
    token = cookie if _CSRF_RE.fullmatch(cookie) else secrets.token_urlsafe(32)
    page = profile_views.profile_page(
        profile=current, weights=weights, action=links.profile(), csrf=token, read_only=reader.signed,
        tz=zone(settings), saved=saved, errors=errors, typed=typed, recheck=recheck)
    response = get_pages(request).render(request, "profile.html", status=status, settings=settings, reader=reader,
                                         links=links, page=page)
    response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path=links.root or "/",
                        secure=request.url.scheme == "https")
    return response
