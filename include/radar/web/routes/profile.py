"""The reader's focus (``/profile``): watchlist and include/exclude rules, read by an Airflow user who may read
the radar (never through a pushed link: it is personal), saved by one who may edit the radar DAG, from this
app's own page (web/csrf.py: a form token bound to the user, Origin and Sec-Fetch-Site)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from include.radar import store
from include.radar.analysis import focus
from include.radar.web import csrf
from include.radar.web.auth import (
    EDIT_REFUSED,
    EditorDep,
    PageError,
    Reader,
    ReaderDep,
    may_edit,
    require_reader,
    user_name,
)
from include.radar.web.inputs import read_body
from include.radar.web.pages import get_pages, page_context, page_links
from include.radar.web.resources import get_resources
from include.radar.web.routes.feed import feed_panel
from include.radar.web.views import profile as profile_views

MAX_PROFILE_BODY = 64 * 1024

router = APIRouter(dependencies=[Depends(require_reader)])


@router.get("/profile", response_class=HTMLResponse)
async def profile(request: Request, reader: ReaderDep) -> HTMLResponse:
    recheck = request.query_params.get("recheck", "")
    editable = await may_edit(request, reader)
    outcome = profile_views.Outcome(
        saved=request.query_params.get("saved") == "1",
        recheck=int(recheck) if recheck.isascii() and recheck.isdigit() and len(recheck) < 6 else 0)
    return await run_in_threadpool(_profile_response, request, reader, editable=editable, outcome=outcome)


@router.post("/profile", response_class=HTMLResponse)
async def save_profile(request: Request, reader: EditorDep) -> Response:
    """Save the profile: an Airflow user who may edit the radar DAG (never a pushed link), from this app's own
    page (Origin, Sec-Fetch-Site) with the form's token, made for this user (web/csrf.py)."""
    resources = get_resources(request)
    settings = await run_in_threadpool(resources.settings)
    csrf.check_same_origin(request, settings)
    body = await read_body(request, MAX_PROFILE_BODY)
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise PageError(400, "请求无效", "提交的内容格式不正确。") from None
    form = {k: v[0] for k, v in fields.items() if v}
    key = await run_in_threadpool(csrf.form_key, resources, settings)
    if not csrf.form_token_valid(form.get("csrf", ""), key, reader.user, resources.clock.now()):
        raise PageError(403, "表单已过期", "请重新打开关注设置页面后再保存（表单校验失败）。")
    typed = {name: form.get(name, "") for name in profile_views.FIELDS}
    try:
        # measured: a regex rule too costly for every article is refused here (off the event loop: RE2 runs
        # without the GIL, and the probes take well under a second whatever was typed)
        profile = await run_in_threadpool(lambda: focus.Profile.build(**{k: [v] for k, v in typed.items()},
                                                                      measure=True))
    except focus.ProfileError as exc:
        return await run_in_threadpool(_profile_response, request, reader, editable=True, status=400,
                                       outcome=profile_views.Outcome(errors=exc.errors, typed=typed))
    lists = {"companies": list(profile.companies), "tickers": list(profile.tickers),
             "sectors": list(profile.sectors), "interests": list(profile.interests), "rules": profile.rule_lines()}

    def write() -> int:
        resources = get_resources(request)
        with resources.connect_write() as conn:
            store.focus.save_profile(conn, lists, user_name(reader.user))
            # the next slot applies the new rules to what the old ones excluded (never this request: its time
            # must not depend on how many articles there are); the page says how many it will look at
            return store.focus.excluded_count(conn, resources.clock.now() - timedelta(hours=focus.RECHECK_HOURS))

    recheck = await run_in_threadpool(write)
    return RedirectResponse(page_links(request).profile() + f"?saved=1&recheck={recheck}", status_code=303)


def _profile_response(request: Request, reader: Reader, *, editable: bool, outcome: profile_views.Outcome,
                      status: int = 200) -> HTMLResponse:
    resources = get_resources(request)
    ctx = page_context(request)
    with resources.connect() as conn:
        current = focus.from_row(store.focus.get_profile(conn), store.focus.slow_rules(conn))
        weights = resources.ranking_weights(conn)
        feed = feed_panel(request, reader, ctx.settings, conn)
    token, reason = "", "" if editable else EDIT_REFUSED
    if editable:
        try:
            token = csrf.form_token(csrf.form_key(resources, ctx.settings), reader.user, ctx.now)
        except csrf.UnknownUser:  # fails closed: shown, never saved
            editable, reason = False, csrf.USER_UNKNOWN
        except csrf.FormKeyMissing:  # shown, not saved, until the operator runs init again
            editable, reason = False, csrf.FORM_KEY_MISSING
    page = profile_views.profile_page(ctx, profile=current, weights=weights, csrf=token, read_only=not editable,
                                      read_only_reason=reason, outcome=outcome)
    return get_pages(request).render(request, "profile.html", status=status, settings=ctx.settings, reader=reader,
                                     links=ctx.links, page=page, feed=feed)
