"""Local stand-ins that speak the real APIs: WeRSS, DeepSeek (OpenAI-compatible) and a JSON push sink.

They are werkzeug request handlers: the tests mount them on pytest-httpserver, the offline demo serves them
with werkzeug's own server. They follow ../shared/reference/external-apis.md: WeRSS's envelopes, error bodies,
page size of 5 and form-encoded login; DeepSeek's ``reasoning_content`` and cache-hit usage. WeRSS's WeChat
login is ``GET /api/v1/wx/sys/info``'s ``data.wx`` as v1.4.9 answers it (``apis/sys_info.py``, ``driver/``):
``token`` and ``expiry_time`` always empty (nothing writes the keys it reads), the scan in ``info`` (its token
and ``expiry.expiry_timestamp``) until WeRSS restarts, ``login`` true until a lapse is seen; current versions
take a token or AK/SK there, older ones a token only, the oldest have no ``wx``. The fake's switches:
``wechat_login`` (None: no ``wx`` block), ``wechat_expires_at``, ``wechat_scanned``, ``wechat_restarted``,
``sys_info_takes_keys``; its collection: ``apply`` and ``collect``.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from include.radar.core.slots import SHANGHAI  # WeRSS's TZ in our compose file: its local-time texts are in it
from include.radar_demo import werss_tasks

CONVERSION_ERROR = "<p>转换失败: 'NoneType' object has no attribute 'strip'</p>"

# WeChat's own pages as WeRSS saved them in place of an article's body (include/radar/collect/body_check.py has the
# sources). The verification page: ``content`` is the page's text as older WeRSS stored it (we-mp-rss #149:
# 「环境异常 当前环境异常，完成验证后即可继续访问。 去验证」), ``content_html`` the page's markup (a weui message:
# title, notice, a 「去验证」 button).
VERIFICATION_TEXT = "环境异常\n当前环境异常，完成验证后即可继续访问。\n去验证"
VERIFICATION_HTML = (
    '<div class="weui-msg"><div class="weui-msg__icon-area"><i class="weui-icon-warn weui-icon_msg"></i></div>'
    '<div class="weui-msg__text-area"><h2 class="weui-msg__title">环境异常</h2>'
    '<p class="weui-msg__desc">当前环境异常，完成验证后即可继续访问。</p></div>'
    '<div class="weui-msg__opr-area"><p class="weui-btn-area">'
    '<a class="weui-btn weui-btn_primary" id="js_verify" href="javascript:;">去验证</a></p></div></div>'
)
# a deleted and a blocked article's page, as older WeRSS saved them (newer ones answer 404 40401 instead)
DELETED_HTML = ('<div class="weui-msg"><div class="weui-msg__text-area"><h2 class="weui-msg__title">'
                "该内容已被发布者删除</h2></div></div>")
BLOCKED_HTML = ('<div class="weui-msg"><div class="weui-msg__text-area"><h2 class="weui-msg__title">'
                "此内容因违规无法查看</h2><p>根据相关法律法规和政策，此内容无法查看。</p><p>查看对应规则</p></div></div>")


def _json(body: Any, status: int = 200) -> Response:
    # ASCII escapes, so that a hostile test string (a lone surrogate) travels as JSON does on the wire
    return Response(json.dumps(body), status=status, content_type="application/json")


def serve(handler: Callable[[Request], Response], port: int = 0) -> str:
    """Serve ``handler`` on a loopback port (``port``, else any free one) in background threads (one per
    request); returns ``host:port``.

    Threaded, unlike pytest-httpserver's default: a stand-in that stalls one request (a slow LLM) must not
    stall every other request with it.
    """
    try:
        server = make_server("127.0.0.1", port, Request.application(handler), threaded=True)
    except OSError:  # the port is taken (another demo running): any free one
        server = make_server("127.0.0.1", 0, Request.application(handler), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"127.0.0.1:{server.server_port}"


def trickle(response: Response, seconds_per_byte: float) -> Response:
    """The same response, its body sent one byte at a time: a server no per-read timeout ever gives up on."""
    body = response.get_data()

    def drip() -> Any:
        for i in range(len(body)):
            time.sleep(seconds_per_byte)
            yield body[i: i + 1]

    return Response(drip(), status=response.status_code, content_type=response.content_type)


def _ok(data: Any) -> Response:
    return _json({"code": 0, "message": "success", "data": data})


def _raw_ok(data_json: str) -> Response:
    """The success envelope around a ``data`` that is already JSON text (possibly hostile)."""
    return Response(f'{{"code": 0, "message": "success", "data": {data_json}}}', content_type="application/json")


@dataclass
class FakeArticle:
    id: str
    mp_id: str
    title: str
    publish_time: int  # seconds
    content_html: str = ""
    url: str = ""
    description: str = ""
    content: str | None = None  # the v1.4.9 simplified body; derived from content_html when None
    body_after: int | None = None  # epoch seconds from which a late body is served
    late_content_html: str = ""
    raw_detail: bytes | None = None  # served as the detail response body as-is (hostile tests)
    stored_at: int | None = None  # epoch seconds WeRSS stored the row (its created_at); None: at publication

    def body(self, now: int) -> tuple[str, str]:
        """(content, content_html) as WeRSS would answer at ``now``."""
        late = self.body_after is not None and now >= self.body_after
        html = self.late_content_html if late else self.content_html
        if not html and (late or self.content is None):
            return CONVERSION_ERROR, ""
        if self.content is not None and not late:
            return self.content, html
        return re.sub(r"<img[^>]*>", '<img alt="图片">', html), html


def collection_task(cron_exp: str, accounts: list[dict[str, Any]] | None = None, *, status: int = 1,
                    name: str = "定时采集") -> dict[str, Any]:
    """A message task as WeRSS v1.4.9 answers it (``core/models/message_task.py``): ``mps_id`` is JSON *text*
    listing ``{"id", "mp_name"}`` of the accounts it covers ("[]": every account; "" cannot load);
    ``status`` 1 is active (the scheduler loads only those); ``cron_exp`` is in WeRSS's local time."""
    mps = json.dumps([{"id": a["id"], "mp_name": a.get("mp_name", "")} for a in accounts or []], ensure_ascii=False)
    return {"id": secrets.token_hex(8), "name": name, "message_type": 0, "message_template": "",
            "web_hook_url": "", "mps_id": mps, "cron_exp": cron_exp, "status": status,
            "headers": "", "cookies": "", "created_at": None, "updated_at": None}  # v1.4.9 records neither


@dataclass
class FakeWeRSS:
    """WeRSS v1.4.9's API surface used by the radar, with switches for failures."""

    accounts: list[dict[str, Any]] = field(default_factory=list)
    articles: list[FakeArticle] = field(default_factory=list)
    username: str = "admin"
    password: str = "secret"
    access_key: str | None = None
    secret_key: str | None = None
    token_lifetime: int = 3 * 24 * 3600
    now: Callable[[], int] = field(default=lambda: int(time.time()))
    failing_accounts: dict[str, int] = field(default_factory=dict)  # mp_id -> HTTP status of its list
    failing_message: str = "upstream error {status}"  # what a failing list says
    down: bool = False
    publish_time_ms: bool = False  # answer publish_time in milliseconds
    # hostile switches: raw JSON row texts added to an account's first page; a raw JSON text served as the
    # ``data`` of an account's list; a list that ignores ``offset``; an account whose list never ends
    extra_rows: dict[str, list[str]] = field(default_factory=dict)
    raw_page_data: dict[str, str] = field(default_factory=dict)
    ignore_offset: bool = False
    endless_accounts: set[str] = field(default_factory=set)
    trickle_seconds_per_byte: float = 0.0  # > 0: every answer's body drips out one byte at a time
    # WeRSS's own WeChat login (sys/info's wx block): scanned or not (None: a WeRSS without the block), and
    # when it lapses (epoch seconds; None: always three days ahead of the fake's clock and of the wall clock,
    # which the radar's steps read, so a test on a fixed date never sees it lapse)
    wechat_login: bool | None = True
    wechat_expires_at: int | None = None
    sys_info_takes_keys: bool = True  # False: an older WeRSS whose sys/info takes a login token only
    sys_info_status: int | None = None  # answer sys/info with this HTTP status (an error body) instead
    # WeRSS's message tasks (消息任务): rows as GET /message_tasks answers them (collection_task() makes one)
    message_tasks: list[dict[str, Any]] = field(default_factory=list)
    # False: a WeRSS whose QR code was never scanned: v1.4.9 then answers login true with an empty token
    wechat_scanned: bool = True
    wechat_restarted: bool = False  # v1.4.9 restarted since its scan: sys/info as if never scanned, collecting
    qr_waiting: bool = False  # a QR code is shown and waits for a scan (auth/qr/status's qr_code)
    # mp_id -> sync_time (epoch seconds): when WeRSS last started collecting the account (0 or absent: never);
    # collect() sets it for the accounts the applied tasks cover
    synced: dict[str, int] = field(default_factory=dict)
    # True: WeRSS's scheduler runs the applied tasks at their cron times (the demo's healthy WeRSS): an account's
    # sync_time is then the last such time before now, as if each run had been watched
    scheduler_running: bool = False

    def __post_init__(self) -> None:
        # task id -> the account ids it collects, fixed when the tasks were applied (「应用」, job/fresh): "all
        # accounts" means those subscribed then. None: not applied since WeRSS started
        self.applied: dict[str, frozenset[str]] | None = None
        self.tokens: dict[str, int] = {}  # token -> expiry
        self.login_attempts = 0
        self.failed_logins = 0
        self.detail_calls: dict[str, int] = {}
        self.list_calls: list[dict[str, str]] = []
        self.sys_info_calls = 0
        self.account_calls: list[str] = []  # mps/{id}
        self.lock = threading.Lock()

    # ----------------------------------------------------------------------------------------- helpers

    def expire_tokens(self) -> None:
        self.tokens.clear()

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("Authorization", "")
        if header.startswith("AK-SK ") and self.access_key:
            return header[6:] == f"{self.access_key}:{self.secret_key}"
        if header.startswith("Bearer "):
            return self.tokens.get(header[7:], 0) > self.now()
        return False

    def _visible(self) -> list[FakeArticle]:
        now = self.now()
        return sorted((a for a in self.articles if a.publish_time <= now), key=lambda a: -a.publish_time)

    def _row(self, article: FakeArticle) -> dict[str, Any]:
        published = article.publish_time * 1000 if self.publish_time_ms else article.publish_time
        return {
            "id": article.id, "mp_id": article.mp_id, "title": article.title, "url": article.url,
            "pic_url": "", "description": article.description, "status": 1, "publish_time": published,
            "created_at": datetime.fromtimestamp(article.stored_at or article.publish_time, SHANGHAI)  # stored, local
            .replace(tzinfo=None).isoformat(),
        }

    def apply(self) -> bool:
        """What 「应用」 (``PUT message_tasks/job/fresh``) does (werss_tasks.load); False: HTTP 500 there."""
        loaded = werss_tasks.load(self.message_tasks, self.accounts)
        if loaded is None:
            return False
        self.applied = loaded
        return True

    def collect(self, at: int | None = None) -> set[str]:
        """A scheduled run of every applied task at ``at`` (default: now): each covered account's ``sync_time``
        is set, as WeRSS's collector does when it starts on an account; nothing without a WeChat token."""
        if not self.wechat_scanned or not self.wechat_login or not self.applied:
            return set()
        covered = set().union(*self.applied.values())
        self.synced.update(dict.fromkeys(covered, self.now() if at is None else at))
        return covered

    # -------------------------------------------------------------------------------------------- routes

    def handle(self, request: Request) -> Response:
        with self.lock:
            response = self._route(request)
        return trickle(response, self.trickle_seconds_per_byte) if self.trickle_seconds_per_byte else response

    def _route(self, request: Request) -> Response:
        path = request.path
        if self.down:
            return _json({"detail": "Service Unavailable"}, 503)
        if path == "/api/v1/wx/auth/login" and request.method == "POST":
            return self._login(request)
        if not self._authorised(request):
            return _json({"detail": "Could not validate credentials"}, 401)
        if path == "/api/v1/wx/mps":
            limit = min(int(request.args.get("limit", 10)), 100)
            offset = int(request.args.get("offset", 0))
            return _ok({"list": self.accounts[offset: offset + limit], "total": len(self.accounts)})
        if path == "/api/v1/wx/articles":
            return self._list(request)
        if path == "/api/v1/wx/sys/info":
            return self._sys_info(request)
        if path == "/api/v1/wx/message_tasks" and request.method == "GET":
            limit = min(int(request.args.get("limit", 10)), 100)
            offset = int(request.args.get("offset", 0))
            return _ok({"list": self.message_tasks[offset: offset + limit], "page": {"limit": limit, "offset": offset},
                        "total": len(self.message_tasks)})
        if path == "/api/v1/wx/message_tasks/job/fresh" and request.method == "PUT":
            if not self.apply():
                return Response("Internal Server Error", status=500, content_type="text/plain")
            return _json({"code": 0, "message": "任务已经重载成功", "data": None})
        if path == "/api/v1/wx/auth/qr/status":
            if request.headers.get("Authorization", "").startswith("AK-SK "):  # a login token only
                return _json({"detail": "Could not validate credentials"}, 401)
            # v1.4.9 says only whether a login happened in this process; newer ones add qr_code (a code is shown)
            return _ok({"login_status": False, **({"qr_code": True} if self.qr_waiting else {})})
        match = re.fullmatch(r"/api/v1/wx/message_tasks/([^/]+)/run", path)
        if match:
            return self._run_task(match.group(1))
        match = re.fullmatch(r"/api/v1/wx/mps/([^/]+)", path)
        if match:
            return self._account(match.group(1))
        match = re.fullmatch(r"/api/v1/wx/articles/([^/]+)", path)
        if match:
            return self._detail(match.group(1))
        return _json({"detail": "Not Found"}, 404)

    def _run_task(self, task_id: str) -> Response:
        body, started = werss_tasks.run(self.message_tasks, self.accounts, task_id)
        if self.wechat_scanned and self.wechat_login:
            self.synced.update(dict.fromkeys(started, self.now()))
        return _json(body)

    def _account(self, mp_id: str) -> Response:
        """An unknown id fails as WeRSS's handler does (its own 40401 caught by its catch-all: 50001, HTTP 201)."""
        self.account_calls.append(mp_id)
        row = next((a for a in self.accounts if str(a.get("id")) == mp_id), None)
        if row is None:
            return _json({"detail": {"code": 50001, "message": "获取公众号详情失败", "data": None}}, 201)
        scheduled = werss_tasks.last_scheduled_run(self.message_tasks, self.applied or {}, mp_id, self.now(), SHANGHAI) \
            if self.scheduler_running and self.wechat_scanned and self.wechat_login else 0
        return _ok(werss_tasks.record(row, max(self.synced.get(mp_id, 0), scheduled)))

    def _login(self, request: Request) -> Response:
        self.login_attempts += 1
        if request.mimetype != "application/x-www-form-urlencoded":
            return _json({"detail": [{"msg": "Field required", "loc": ["body", "username"]}]}, 422)
        if self.failed_logins >= 5:
            return _json({"detail": {"code": 40101, "message": "账号已锁定，请重启服务"}}, 202)
        if request.form.get("username") != self.username or request.form.get("password") != self.password:
            self.failed_logins += 1
            return _json({"detail": {"code": 40101, "message": "用户名或密码错误"}}, 202)
        token = secrets.token_hex(16)
        self.tokens[token] = self.now() + self.token_lifetime
        return _ok({"access_token": token, "token_type": "bearer", "expires_in": self.token_lifetime})

    def _list(self, request: Request) -> Response:
        if "has_content" in request.args:
            return _json({"detail": {"code": 40001, "message": "the radar must never send has_content"}}, 406)
        mp_id = request.args.get("mp_id", "")
        self.list_calls.append(dict(request.args))
        if mp_id in self.failing_accounts:
            status = self.failing_accounts[mp_id]
            return _json({"detail": {"code": 50001, "message": self.failing_message.format(status=status)}}, status)
        if mp_id in self.raw_page_data:
            return _raw_ok(self.raw_page_data[mp_id])
        limit = min(int(request.args.get("limit", 5)), 100)  # WeRSS's default page size is 5
        offset = 0 if self.ignore_offset else int(request.args.get("offset", 0))
        if mp_id in self.endless_accounts:  # fresh ids on every page, all published a minute ago
            rows = [self._row(FakeArticle(id=f"{mp_id}-{offset + i}", mp_id=mp_id, title=f"无尽{offset + i}",
                                          publish_time=self.now() - 60)) for i in range(limit)]
            return _ok({"list": rows, "total": 10**9})
        matching = [a for a in self._visible() if not mp_id or a.mp_id == mp_id]
        rows = [json.dumps(self._row(a)) for a in matching[offset: offset + limit]]
        if offset == 0:
            rows += self.extra_rows.get(mp_id, [])
        return _raw_ok(f'{{"list": [{", ".join(rows)}], "total": {len(matching)}}}')

    def _sys_info(self, request: Request) -> Response:
        self.sys_info_calls += 1
        if request.headers.get("Authorization", "").startswith("AK-SK ") and not self.sys_info_takes_keys:
            return _json({"detail": "Could not validate credentials"}, 401)
        if self.sys_info_status is not None:
            return _json({"detail": {"code": 50001, "message": "获取系统信息失败"}}, self.sys_info_status)
        now = self.now()
        data: dict[str, Any] = {
            "os": {"name": "Linux", "version": "#1 SMP", "docker_version": "1.4.9", "release": "6.1.0"},
            "python_version": "3.11.9", "uptime": 86400.0,
            "system": {"node": "werss", "machine": "x86_64", "processor": ""},
            "api_version": "1.0.0", "core_version": "1.4.9", "latest_version": "1.4.9", "need_update": False,
            "article": {"all_count": len(self.articles)}, "queue": {"size": 0},
        }
        if self.wechat_login is not None:
            ahead = max(now, int(time.time())) + 3 * 24 * 3600
            expires = self.wechat_expires_at if self.wechat_expires_at is not None else ahead
            logged_in = self.wechat_login and expires > now  # getStatus() checks the expiry since we-mp-rss PR #437
            local = datetime.fromtimestamp(expires, SHANGHAI).strftime("%Y-%m-%d %H:%M:%S")
            info = {  # the stored login: the WeChat session's token and cookie are in it
                "token": "1234567890", "cookie": "slave_sid=WECHAT_SESSION_SECRET; slave_user=gh_0123456789ab",
                "fingerprint": "fp0123456789", "ext_data": {"wx_app_name": "雷达测试号"},
                "expiry": {"expiry_timestamp": expires, "remaining_seconds": 4 * 24 * 3600, "expiry_time": local},
            } if self.wechat_login else None
            # v1.4.9 reads wx.lic's top-level token, which nothing writes: the scan shows in info, in its own process
            data["wx"] = {"token": "", "expiry_time": "", "info": info, "login": logged_in}
            if not self.wechat_scanned or self.wechat_restarted:  # driver/success.py starts with WX_LOGIN_ED = True
                data["wx"] = {"token": "", "expiry_time": "", "info": None, "login": True}
        return _ok(data)

    def _detail(self, article_id: str) -> Response:
        self.detail_calls[article_id] = self.detail_calls.get(article_id, 0) + 1
        article = next((a for a in self.articles if a.id == article_id), None)
        if article is None:
            return _json({"detail": {"code": 40401, "message": "文章不存在"}}, 404)
        if article.raw_detail is not None:
            return Response(article.raw_detail, content_type="application/json")
        content, content_html = article.body(self.now())
        return _ok({**self._row(article), "content": content, "content_html": content_html,
                    "updated_at": self._row(article)["created_at"]})


# ------------------------------------------------------------------------------------------ DeepSeek

Responder = Callable[[dict[str, Any]], "tuple[int, dict[str, Any]] | dict[str, Any] | str"]


def completion(content: str, *, finish_reason: str = "stop", model: str = "deepseek-v4-pro",
               prompt_tokens: int = 1200, completion_tokens: int = 400, cache_hit: int = 256) -> dict[str, Any]:
    """A DeepSeek chat completion body: reasoning_content beside content, usage with cache tokens."""
    return {
        "id": "chatcmpl-" + secrets.token_hex(6),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "reasoning_content": "先通读全文，再判断标的与催化剂……"},
            "finish_reason": finish_reason,
            "logprobs": None,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_cache_hit_tokens": cache_hit, "prompt_cache_miss_tokens": prompt_tokens - cache_hit,
            "completion_tokens_details": {"reasoning_tokens": completion_tokens // 2},
        },
    }


def api_error(status: int, message: str, kind: str = "invalid_request_error") -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": kind, "param": None, "code": None}}


@dataclass
class FakeDeepSeek:
    """POST /chat/completions and GET /models (``models``: drop one to play a retired model). ``responder`` maps the request body to a completion, a (status, body) pair,
    or a plain string (the content of a normal answer). ``script`` answers take precedence, one per call."""

    responder: Responder = field(default=lambda body: "{}")
    api_key: str = "sk-test"
    models: tuple[str, ...] = ("deepseek-v4-pro", "deepseek-flash")
    # > 0: like DeepSeek under load, hold each request open this long with blank keep-alive lines first
    delay_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.model_list_calls = 0
        self.script: list[Any] = []
        self.lock = threading.Lock()

    def handle(self, request: Request) -> Response:
        with self.lock:
            if request.path.endswith("/models") and request.method == "GET":
                return self._models(request)
            if not request.path.endswith("/chat/completions"):
                return _json({"error": {"message": "not found"}}, 404)
            if request.headers.get("Authorization") != f"Bearer {self.api_key}":
                return _json(*reversed(api_error(401, "Authentication Fails, Your api key is invalid", "authentication_error")))
            body = request.get_json(force=True)
            self.requests.append(body)
            if body.get("model") not in self.models:
                status, payload = api_error(400, f"Model Not Exist: {body.get('model')}")
                return _json(payload, status)
            scripted = self.script.pop(0) if self.script else None
        # the responder runs outside the lock: a slow one (a stand-in for DeepSeek's latency) answers
        # concurrent requests concurrently, as DeepSeek does
        answer = scripted if scripted is not None else self.responder(body)
        if isinstance(answer, tuple):  # (status, body) or (status, body, headers)
            response = _json(answer[1], answer[0])
            response.headers.update(answer[2] if len(answer) > 2 else {})
            return response
        if isinstance(answer, str):
            answer = completion(answer, model=body["model"])
        if self.delay_seconds:
            return _kept_alive(json.dumps(answer).encode(), self.delay_seconds)
        return _json(answer)

    def _models(self, request: Request) -> Response:
        """GET /models: the models this key may call, as DeepSeek lists them (free, no tokens)."""
        self.model_list_calls += 1
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _json(*reversed(api_error(401, "Authentication Fails, Your api key is invalid", "authentication_error")))
        return _json({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "deepseek"} for m in self.models]})

    def user_messages(self) -> list[str]:
        return [next(m["content"] for m in r["messages"] if m["role"] == "user") for r in self.requests]


def _kept_alive(body: bytes, seconds: float) -> Response:
    """A 200 whose body starts with a blank line per second for ``seconds`` (valid JSON whitespace)."""

    def lines() -> Any:
        waited = 0.0
        while waited < seconds:
            step = min(1.0, seconds - waited)
            time.sleep(step)
            waited += step
            yield b"\n"
        yield body

    return Response(lines(), content_type="application/json")


# ------------------------------------------------------------------------------------------ push sink


@dataclass
class PushSink:
    """A generic JSON webhook (apprise ``json://``) that records what it receives; ``fail_next`` answers
    that many requests with HTTP 500 first."""

    fail_next: int = 0
    on_message: Callable[[dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.attempts = 0
        self.lock = threading.Lock()

    def handle(self, request: Request) -> Response:
        with self.lock:
            self.attempts += 1
            if self.fail_next > 0:
                self.fail_next -= 1
                return _json({"error": "temporarily unavailable"}, 500)
            message = request.get_json(force=True)
            self.received.append(message)
            if self.on_message:
                self.on_message(message)
            return _json({"ok": True})
