"""Bounded failure, the report pages' part: what a hostile or careless world sends them.

Each test names the fault it brings: impossible dates and ids, malformed signatures, arbitrary text in every
path segment and query parameter, a forged Host header, a logged-in user without the right role, links an
article talked the digest into, settings kept as Airflow Variables, and signatures in the access log. Every
answer must be a page of its own (403, 404, ...), never a 500, and never hand out more than was asked for.

Rooms: web/ (app.py, auth.py, middleware.py, server.py, routes/, views/).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import example, given, settings
from hypothesis import strategies as st

from include.radar import DAG_ID, store
from include.radar.core import signing
from include.radar.core.clock import FixedClock
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI
from include.radar.web.app import create_app
from include.radar.web.views import common
from tests.pages import SECRET, FakeUser, airflow_get_user, make_settings

pytestmark = pytest.mark.hostile

# 20:00 in Shanghai on the day the pages are looked at
NOW = datetime(2026, 1, 8, 20, 0, tzinfo=SHANGHAI).astimezone(UTC)
TODAY = date(2026, 1, 8)
BASE = "https://radar.example.com/radar"


def permission_seam() -> Any:
    """The function the app asks "may this user read the radar?"; tests override it like get_user."""
    from include.radar.web.auth import may_read_radar

    return may_read_radar


def build_app(
    db_url: str,
    *,
    user: Any = None,
    permitted: bool | None = None,
    settings: Settings | None = None,
    **kwargs: Any,
) -> FastAPI:
    cfg = settings or make_settings()
    app = create_app(lambda: cfg, db_url, clock=FixedClock(NOW), **kwargs)
    if user is not None:
        app.dependency_overrides[airflow_get_user()] = lambda: user
    if permitted is not None:
        app.dependency_overrides[permission_seam()] = lambda _user: permitted
    return app


def signed(path: str, *, now: datetime = NOW, days: int = 7, secret: str = SECRET) -> str:
    query = signing.sign(path, secret, now, days)
    return f"{path}?exp={query['exp']}&sig={query['sig']}"


def mac(path: str, exp: str, secret: str = SECRET) -> str:
    """A correct HMAC for an arbitrary ``exp`` text (the way the signer computes it from the integer)."""
    return hmac.new(secret.encode(), f"{path}\n{int(exp)}".encode(), hashlib.sha256).hexdigest()


def hrefs(html: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]*)"', html)]


def is_error_page(response: Any, status: int) -> bool:
    return (
        response.status_code == status
        and response.headers["content-type"].startswith("text/html")
        and f'<div class="code">{status}</div>' in response.text
        and "Traceback" not in response.text
    )


# ------------------------------------------------------------------------------------ 1. impossible pages


@pytest.mark.parametrize(
    "path",
    [
        "/daily/0001-01-01",  # today: a 500 (timedelta overflow computing the previous-day link)
        "/daily/9999-12-31",
        "/daily/1999-12-31",  # before the radar could have existed
        f"/daily/{(TODAY + timedelta(days=367)).isoformat()}",  # more than a year ahead
        "/daily/2026-02-30",
        "/daily/2026-13-01",
        "/daily/20260108",
        "/daily/yesterday",
        "/daily/2026-01-08%0A",
        "/daily/%EF%BC%92026-01-08",  # a full-width digit
        "/analysis/abc",
        "/analysis/0",
        "/analysis/-1",
        "/analysis/1.5",
        "/analysis/12%0A",
        "/analysis/%D9%A3",  # an Arabic-Indic three
        "/analysis/99999999999999999999",
    ],
)
def test_impossible_dates_and_ids_are_404_pages(db_url: str, path: str) -> None:
    client = TestClient(build_app(db_url, user=FakeUser(), permitted=True))
    response = client.get(path)
    assert is_error_page(response, 404), (response.status_code, response.text[-500:])
    assert "返回总览" in response.text


def test_the_edges_of_the_sane_range_are_pages(db_url: str) -> None:
    client = TestClient(build_app(db_url, user=FakeUser(), permitted=True))
    for day in (date(2000, 1, 1), TODAY, TODAY + timedelta(days=366)):
        response = client.get(f"/daily/{day.isoformat()}")
        assert response.status_code == 200, day
        assert "这一天没有任何数据" in response.text


# -------------------------------------------------------------------------------------- 2. signatures


def _bad_links() -> list[tuple[str, str]]:
    path = "/daily/2026-01-08"
    good = signing.sign(path, SECRET, NOW, 7)
    exp, sig = good["exp"], good["sig"]
    arabic = exp.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    huge = str(10**30)
    return [
        ("non-ascii sig", f"exp={exp}&sig={quote('é' * 64)}"),
        ("non-ascii short sig", f"exp={exp}&sig=%C3%BC"),
        ("uppercase sig", f"exp={exp}&sig={sig.upper()}"),
        ("sig with a space", f"exp={exp}&sig={sig[:-1]}%20"),
        ("63 hex chars", f"exp={exp}&sig={sig[:-1]}"),
        ("65 hex chars", f"exp={exp}&sig={sig}0"),
        ("two sigs", f"exp={exp}&sig={sig}&sig={sig}"),
        ("two exps", f"exp={exp}&exp={exp}&sig={sig}"),
        # a correct HMAC over an integer spelled in a way the signer never writes
        ("arabic-indic exp", f"exp={quote(arabic)}&sig={mac(path, arabic)}"),
        ("exp with a plus", f"exp=%2B{exp}&sig={mac(path, exp)}"),
        ("exp with a space", f"exp=%20{exp}&sig={mac(path, exp)}"),
        ("exp with underscores", f"exp={exp[:4]}_{exp[4:]}&sig={mac(path, exp)}"),
        # correctly signed, but expiring in the year 10^22 (today: a 500 rendering "valid until")
        ("huge exp", f"exp={huge}&sig={mac(path, huge)}"),
        ("exp beyond any link's validity", f"exp={int(exp) + 400 * 86400}&sig={mac(path, str(int(exp) + 400 * 86400))}"),
        ("negative exp", f"exp=-1&sig={mac(path, '-1')}"),
        ("5000-digit exp", f"exp={'9' * 5000}&sig={sig}"),
        ("empty exp and sig", "exp=&sig="),
        ("NUL sig", f"exp={exp}&sig=%00"),
    ]


@pytest.mark.parametrize(("case", "query"), _bad_links(), ids=[c for c, _ in _bad_links()])
def test_malformed_signatures_are_403_pages(db_url: str, case: str, query: str) -> None:
    client = TestClient(build_app(db_url))
    response = client.get(f"/daily/2026-01-08?{query}")
    assert is_error_page(response, 403), (case, response.status_code, response.text[-300:])
    assert "链接无效或已过期" in response.text
    assert client.get(signed("/daily/2026-01-08")).status_code == 200  # the genuine link still opens


def test_verify_is_false_never_an_exception_for_odd_input() -> None:
    path = "/daily/2026-01-08"
    exp = signing.sign(path, SECRET, NOW, 7)["exp"]
    good = mac(path, exp)
    assert signing.verify(path, exp, good, SECRET, NOW) is True
    for bad_exp, bad_sig in [
        (exp, "é" * 64),
        (exp, "\udcff" * 64),
        (exp, good.upper()),
        (exp, good + "\n"),
        (f"{exp}\n", good),
        (str(10**30), mac(path, str(10**30))),
        ("٣" * 10, mac(path, "٣" * 10)),
        ("9" * 5000, good),
        (None, good),
        (exp, None),
    ]:
        assert signing.verify(path, bad_exp, bad_sig, SECRET, NOW) is False, (bad_exp, bad_sig)
    assert signing.verify("/daily/\udcff", exp, good, SECRET, NOW) is False  # a lone surrogate in the path


# ---------------------------------------------------------------------------------- 3. arbitrary input

_ROUTES = ("", "daily/", "analysis/", "static/")
_INTERESTING = st.sampled_from(
    [
        "0001-01-01",
        "9999-12-31",
        "2026-02-30",
        "0",
        "-1",
        "9" * 40,
        "%00",
        "%ff%fe",
        "%C3%A9",
        "%2e%2e",
        "%2F%2Fevil.example",
        "..",
        "icon.svg",
        "2026-01-08",
        "1",
    ]
)
# raw percent-escapes (valid or not as UTF-8), sent as they are
_RAW = st.from_regex(r"\A(%[0-9A-Fa-f]{2}|[A-Za-z0-9._~-]){0,40}\Z")
_TEXT = st.text(max_size=60) | st.text(min_size=2000, max_size=5000, alphabet=st.characters(codec="utf-8"))
_SEGMENT = _INTERESTING | _RAW | _TEXT.map(lambda t: quote(t, safe=""))
_VALUE = _INTERESTING | _TEXT
_PARAMS = st.dictionaries(st.sampled_from(["exp", "sig", "next", "day", "x"]) | st.text(max_size=10), _VALUE, max_size=4)


@pytest.fixture(scope="module")
def fuzz_clients(database_url: str) -> dict[str, TestClient]:
    """Read-only: what the fuzzer reaches is an empty database (rows do not change which code runs)."""
    return {
        "signed-link secret, no user": TestClient(build_app(database_url)),
        "logged-in reader": TestClient(build_app(database_url, user=FakeUser(), permitted=True)),
    }


@settings(max_examples=300, deadline=None)
@given(route=st.sampled_from(_ROUTES), segment=_SEGMENT, params=_PARAMS, who=st.sampled_from([0, 1]))
@example(route="daily/", segment="0001-01-01", params={}, who=1)
@example(route="daily/", segment="2026-01-08", params={"exp": "1900000000", "sig": "é"}, who=0)
@example(route="analysis/", segment="1", params={"exp": "1900000000", "sig": "\x00" * 64}, who=1)
@example(route="", segment="", params={"sig": "ü" * 64, "exp": "٣"}, who=0)
def test_no_input_makes_a_500(
    fuzz_clients: dict[str, TestClient], route: str, segment: str, params: dict[str, str], who: int
) -> None:
    client = list(fuzz_clients.values())[who]
    url = f"/{route}{segment}" if route else "/"
    response = client.get(url, params=params)
    assert response.status_code < 500, (url, params, response.status_code, response.text[-300:])
    assert response.headers["content-type"].startswith(("text/html", "image/svg+xml"))


# ------------------------------------------------------------------------------------ 4. login redirect


def _login_href(html: str) -> str:
    [href] = [h for h in hrefs(html) if "/auth/login" in h]
    return href


@pytest.mark.parametrize("mounted", [False, True])
def test_the_login_link_comes_back_to_this_page_on_this_host(db_url: str, mounted: bool) -> None:
    radar = build_app(db_url)
    app: FastAPI = radar
    prefix = ""
    if mounted:
        app, prefix = FastAPI(), "/radar"
        app.mount(prefix, radar)
    client = TestClient(app)
    hostile = {"Host": "evil.example", "X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "javascript"}

    for path, query in (("/daily/2026-01-08", ""), ("/daily/@evil.example", "?exp=1&sig=abc"), ("/analysis/7", "")):
        response = client.get(prefix + path + query, headers=hostile)
        assert response.status_code in (401, 403)
        login = _login_href(response.text)
        # Airflow's own login route, relative to this host (the Airflow root is where the app is mounted)
        assert login.startswith("/api/v2/auth/login?next=")
        [next_target] = parse_qs(urlsplit(login).query)["next"]
        assert next_target == prefix + path  # the page itself, without its (stale) signature
        for href in hrefs(response.text):
            assert href.startswith("/") and not href.startswith("//"), href
            assert "evil.example" not in (urlsplit(href).netloc or ""), href


def test_a_login_target_is_always_a_path_on_this_host() -> None:
    from include.radar.web.auth import local_path

    for raw, expected in [
        ("/daily/2026-01-08", "/daily/2026-01-08"),
        ("//evil.example/x", "/evil.example/x"),
        ("/\\evil.example/x", "/evil.example/x"),
        ("\\\\evil.example", "/evil.example"),
        ("https://evil.example/x", "/https://evil.example/x"),
        ("", "/"),
        ("/\t/evil.example", "/evil.example"),
    ]:
        assert local_path(raw) == expected, raw


# -------------------------------------------------------------------------------------- 5. authorization


def test_a_login_without_read_access_to_the_dag_is_refused(db_url: str) -> None:
    permitted = TestClient(build_app(db_url, user=FakeUser(), permitted=True))
    assert permitted.get("/daily/2026-01-08").status_code == 200
    assert permitted.get("/").status_code == 200

    refused = TestClient(build_app(db_url, user=FakeUser("visitor"), permitted=False))
    for path in ("/", "/daily/2026-01-08", "/analysis/1"):
        response = refused.get(path)
        assert is_error_page(response, 403), path
        assert "没有查看权限" in response.text and DAG_ID in response.text
    # a signed link needs no login at all, and a refused user holding one is let in by the link
    assert TestClient(build_app(db_url)).get(signed("/daily/2026-01-08")).status_code == 200
    assert refused.get(signed("/daily/2026-01-08")).status_code == 200


def test_the_permission_is_asked_of_airflows_auth_manager(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No override: the real check calls ``is_authorized_dag(method="GET", details=DagDetails(id=DAG_ID))``."""
    import airflow.api_fastapi.app as airflow_app
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    asked: list[dict[str, Any]] = []

    class FakeAuthManager:
        def is_authorized_dag(self, **kwargs: Any) -> bool:
            asked.append(kwargs)
            return kwargs["user"].username == "analyst"

    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: FakeAuthManager())
    assert TestClient(build_app(db_url, user=FakeUser())).get("/").status_code == 200
    assert TestClient(build_app(db_url, user=FakeUser("visitor"))).get("/").status_code == 403
    assert [(a["method"], a["details"]) for a in asked] == [("GET", DagDetails(id=DAG_ID))] * 2

    def broken() -> Any:
        raise RuntimeError("Auth Manager has not been initialized yet")

    monkeypatch.setattr(airflow_app, "get_auth_manager", broken)
    assert is_error_page(TestClient(build_app(db_url, user=FakeUser())).get("/"), 403)  # fails closed, no 500


# --------------------------------------------------------------------------------------- 6. digest links


def _seed_digest(conn: Any, digest_md: str) -> None:
    store.reports.upsert_daily_report(
        conn,
        {
            "report_date": TODAY,
            "status": store.common.REPORT_OK,
            "digest_md": digest_md,
            "digest_json": {"top_opportunities": [], "watchlist": []},
            "slots_done": [],
            "stats": {},
            "model": "deepseek-v4-pro",
            "prompt_version": "digest/v1",
            "error": None,
            "slot_run_id": None,
        },
    )
    conn.commit()


HOSTILE_DIGEST = "\n\n".join(
    [
        "[js](javascript:alert(1)) [JS](JaVaScRiPt:alert(1)) [tab](java\tscript:alert(1))",
        "[data](data:text/html;base64,PHNjcmlwdD4=) [vb](vbscript:msgbox(1)) [file](file:///etc/passwd)",
        "[relative](evil/path) [rooted](/evil/path) [dots](../../etc) [query](?x=1) [frag](#top)",
        "[proto-relative](//evil.example/x) [backslash](\\\\evil.example/x) [slash-backslash](/\\evil.example)",
        "<//evil.example/auto> <javascript:alert(3)> [ref-style][r]",
        "[r]: //evil.example/ref",
        "[ok](https://ok.example/a) <https://auto.example/b> [HTTP](HTTP://caps.example/c)",
        f"[canonical analysis]({BASE}/analysis/5) [rooted analysis](/analysis/6)",
        f"[canonical day]({BASE}/daily/2026-01-07) [impossible day]({BASE}/daily/2026-02-30)",
        f"[not a page]({BASE}/../../admin)",
    ]
)


def test_digest_renders_only_the_radars_own_page_links() -> None:
    rewrite = common.digest_link_rewriter(BASE, common.Links(root="/radar"))
    html = str(common.render_markdown(HOSTILE_DIGEST, rewrite))
    # the digest is the LLM's: an article can make it write any URL, so only the radar's own pages are links
    assert sorted(hrefs(html)) == sorted(["/radar/analysis/5", "/radar/analysis/6", "/radar/daily/2026-01-07"])
    # refused links stay readable as text
    for text in ("proto-relative", "relative", "data", "vb", "ref-style", "//evil.example/auto", "<p>ok ",
                 "https://auto.example/b", "not a page", "impossible day"):
        assert text in html, text
    # without a rewriter (no app to link to) no link survives
    plain = str(common.render_markdown("[a](/analysis/5) [b](https://ok.example/) [c](//evil.example)"))
    assert hrefs(plain) == []


def test_the_daily_page_shows_hostile_digest_links_as_text(db_url: str, conn: Any) -> None:
    _seed_digest(conn, HOSTILE_DIGEST)
    html = TestClient(build_app(db_url, user=FakeUser(), permitted=True)).get("/daily/2026-01-08").text
    digest = html[html.find('<div class="md">') :].split("</section>")[0]
    links = hrefs(digest)
    assert links and all(h.startswith(("/analysis/", "/daily/")) for h in links), links
    assert not any(h.startswith("//") for h in links)
    assert "/analysis/6" in links and "/daily/2026-01-07" in links


# ----------------------------------------------------------------------------- 7. settings as Variables


@pytest.fixture
def variables(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Airflow Variables as the api-server reads them (``Variable.get`` of airflow.models); env cleared."""
    from airflow.models.variable import Variable

    from include.radar.core.settings import SETTING_NAMES, env_name

    for name in SETTING_NAMES:
        monkeypatch.delenv(env_name(name), raising=False)
    stored: dict[str, str] = {}
    sentinel = object()

    def get(key: str, default_var: Any = sentinel, deserialize_json: bool = False, team_name: str | None = None) -> Any:
        if key in stored:
            return stored[key]
        if default_var is sentinel:
            raise KeyError(key)
        return default_var

    monkeypatch.setattr(Variable, "get", staticmethod(get))
    return stored


def test_settings_kept_as_airflow_variables_reach_the_pages(db_url: str, variables: dict[str, str]) -> None:
    variables["radar_link_secret"] = "secret-from-a-variable-0123456789abcdef"
    variables["radar_push_score_threshold"] = "77"
    app = create_app(db_url=db_url, clock=FixedClock(NOW))  # the default settings loader, as in the api-server
    client = TestClient(app)
    assert client.get(signed("/daily/2026-01-08", secret="secret-from-a-variable-0123456789abcdef")).status_code == 200
    assert client.get(signed("/daily/2026-01-08", secret="another-secret")).status_code == 403
    assert "推送阈值 77 分" in client.get(signed("/", secret="secret-from-a-variable-0123456789abcdef")).text


def test_the_environment_wins_over_a_variable(
    db_url: str, variables: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    variables["radar_push_score_threshold"] = "77"
    variables["radar_link_secret"] = "secret-from-a-variable-0123456789abcdef"
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_SCORE_THRESHOLD", "55")
    client = TestClient(create_app(db_url=db_url, clock=FixedClock(NOW)))
    assert "推送阈值 55 分" in client.get(signed("/", secret="secret-from-a-variable-0123456789abcdef")).text


def test_settings_come_from_the_metadata_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``Variable.get`` of this Airflow (the test AIRFLOW_HOME's metadata DB), not a stand-in."""
    from airflow.models.variable import Variable

    from include.radar.core.settings import env_name
    from include.radar.web.app import pages_settings

    monkeypatch.delenv(env_name("push_score_threshold"), raising=False)
    monkeypatch.delenv(env_name("max_analysis_attempts"), raising=False)
    key = "radar_push_score_threshold"
    Variable.set(key, "83")
    try:
        assert pages_settings().push_score_threshold == 83
    finally:
        Variable.delete(key)
    assert pages_settings().push_score_threshold == Settings().push_score_threshold
    assert pages_settings().max_analysis_attempts == Settings().max_analysis_attempts  # never set: the default


# -------------------------------------------------------------------------------------- 8. access logs


def _uvicorn_record(path_with_query: str) -> logging.LogRecord:
    """A record exactly as uvicorn's h11/httptools protocols log a finished request."""
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("203.0.113.9:51234", "GET", path_with_query, "1.1", 200),
        None,
    )


def test_signatures_never_reach_the_uvicorn_access_log() -> None:
    import include.radar.web.app  # noqa: F401 - importing the app installs the filter
    from include.radar.web.server import SignatureLogFilter, install_access_log_filter

    access = logging.getLogger("uvicorn.access")
    assert sum(isinstance(f, SignatureLogFilter) for f in access.filters) == 1
    install_access_log_filter()
    install_access_log_filter()
    assert sum(isinstance(f, SignatureLogFilter) for f in access.filters) == 1

    sig = "ab" * 32
    for raw in (
        f"/radar/daily/2026-01-08?exp=1767225600&sig={sig}",
        f"/radar/daily/2026-01-08?sig={sig}&exp=1767225600",
        f"/radar/analysis/3?x=1&%73ig={sig}&exp=1767225600",
        f"/radar/analysis/3?sig={sig}&sig={sig[::-1]}",
    ):
        record = _uvicorn_record(raw)
        assert access.filter(record)
        message = record.getMessage()
        assert sig not in message and sig[::-1] not in message, message
        assert "sig=***" in message and message.startswith('203.0.113.9:51234 - "GET /radar/')
        assert message.endswith(' HTTP/1.1" 200')
    assert "exp=1767225600" in _filtered(f"/radar/daily/2026-01-08?exp=1767225600&sig={sig}")
    untouched = "/radar/daily/2026-01-08?design=1"
    assert _filtered(untouched) == f'203.0.113.9:51234 - "GET {untouched} HTTP/1.1" 200'


def _filtered(path: str) -> str:
    record = _uvicorn_record(path)
    logging.getLogger("uvicorn.access").filter(record)
    return record.getMessage()


def test_signatures_never_reach_airflows_own_access_log(db_url: str) -> None:
    """Airflow 3.3's api-server logs requests with HttpAccessLogMiddleware (uvicorn's access log is off)."""
    from airflow.api_fastapi.common.http_access_log import HttpAccessLogMiddleware
    from structlog.testing import capture_logs

    root = FastAPI()
    root.mount("/radar", build_app(db_url))
    root.add_middleware(HttpAccessLogMiddleware)
    link = "/radar" + signed("/daily/2026-01-08")
    sig = parse_qs(urlsplit(link).query)["sig"][0]
    with capture_logs() as events:
        assert TestClient(root).get(link).status_code == 200
    [event] = [e for e in events if e.get("event") == "request finished"]
    assert event["path"] == "/radar/daily/2026-01-08"
    assert sig not in repr(event) and "sig=%2A%2A%2A" in event["query"]
