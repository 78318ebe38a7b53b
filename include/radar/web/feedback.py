"""👍 / 👎 / 已知道: the reader's verdict on an analysis, from any page that shows it, with or without a login.

Each button is a small POST form carrying a signed action (signing.py: ``feedback:/analysis/<id>`` and an
expiry, made when the page is rendered), and the token is the whole authority: it names one analysis, is no
link signature (it opens no page), cannot be known by another site, and expires with the link a page came
from. The verdict is stored per analysis, so a second click changes nothing. After the vote the reader is
sent back (303) to the entry they voted on; without a link secret the pages say so instead of showing buttons
that cannot work. The rules: docs/readers-radar.md, docs/security.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlencode

from fastapi import Request

from include.radar.core import signing
from include.radar.core.settings import Settings
from include.radar.pushes.ranking import VERDICTS
from include.radar.web.auth import VIA, PageError, Reader, app_path, day_link_message, local_path
from include.radar.web.resources import get_resources
from include.radar.web.views.common import Links

MAX_BODY = 4096
USER_TOKEN_DAYS = 1  # a logged-in reader's buttons work for a day after the page was rendered


def action_path(analysis_id: int) -> str:
    return f"feedback:/analysis/{int(analysis_id)}"


@dataclass(frozen=True)
class Buttons:
    """One analysis's feedback form: where it posts, its token, the page to come back to, the verdict so far."""

    analysis_id: int
    url: str
    exp: str
    token: str
    back: str
    current: str | None

    @property
    def choices(self) -> list[tuple[str, str, bool]]:
        return [(value, label, value == self.current) for value, label in VERDICTS.items()]

    @property
    def anchor(self) -> str:
        return f"fb-{self.analysis_id}"


class Forms:
    """Makes the buttons of one page render; None for every analysis when there is no link secret."""

    def __init__(self, secret: str | None, now: datetime, root: str, back: str, expires: int | None) -> None:
        self.secret = secret
        self.now = now
        self.root = root
        self.back = back
        # a signed page's buttons expire with its link; a logged-in reader's after USER_TOKEN_DAYS
        self.expires = int(expires or (now + timedelta(days=USER_TOKEN_DAYS)).timestamp())

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    def buttons(self, analysis_id: int, current: str | None) -> Buttons | None:
        if not self.secret:
            return None
        token = signing.sign_until(action_path(analysis_id), self.secret, self.expires)
        return Buttons(analysis_id, f"{self.root}/analysis/{int(analysis_id)}/feedback", token["exp"], token["sig"],
                       self.back, current)


@dataclass(frozen=True)
class Vote:
    verdict: str
    back: str


def parse_vote(body: bytes, analysis_id: int, secret: str | None, now: datetime, root: str) -> Vote:
    """The vote a form posted, verified; a PageError (400 or 403) for anything else."""
    if len(body) > MAX_BODY:
        raise PageError(400, "请求无效", "反馈请求过大。")
    try:
        fields = parse_qs(body.decode("ascii"), strict_parsing=False, max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        raise PageError(400, "请求无效", "反馈请求的格式不正确。") from None
    one = {k: v[0] for k, v in fields.items() if len(v) == 1}
    verdict = one.get("verdict", "")
    if verdict not in VERDICTS:
        raise PageError(400, "请求无效", "反馈只能是 有用、没用 或 早知道了。")
    if not signing.verify(action_path(analysis_id), one.get("exp"), one.get("tok"), secret, now):
        raise PageError(403, "反馈链接无效或已过期", "这个反馈按钮已过期或不属于这条分析。请刷新页面（或打开最新推送的链接）后再点。")
    return Vote(verdict, safe_back(one.get("back", ""), root, analysis_id))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENCODED_DOT = re.compile(r"%2e", re.IGNORECASE)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: ``path`` with its ``.`` and ``..`` segments resolved, as a browser resolves them."""
    out: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


def safe_back(back: str, root: str, analysis_id: int) -> str:
    """Where to return after voting: a path of this app (never another host), else the analysis page.

    ``back`` is read the way a browser will read the ``Location`` it becomes: tabs and newlines dropped,
    ``\\`` as ``/``, ``%2e`` as ``.``, dot segments resolved — so ``/radar/../..//evil.example`` is seen for the
    ``//evil.example`` it is. The answer is that resolved path (and the query), never the raw text.
    """
    fallback = f"{root}/analysis/{int(analysis_id)}"
    cleaned = _CONTROL.sub("", back).split("#", 1)[0]
    path, sep, query = cleaned.partition("?")
    path = remove_dot_segments(_ENCODED_DOT.sub(".", path.replace("\\", "/")))
    if not path.startswith("/") or path.startswith("//"):
        return fallback
    if root and not (path == root or path.startswith(root + "/")):
        return fallback
    return path + sep + query


def day_signer(reader: Reader, settings: Settings) -> Callable[[str], str] | None:
    """On a signed daily page: sign links with the same expiry as the page's own link (never longer), so a
    phone that keeps no cookie still opens them, and its origin (a day's links are one client to the per-link
    bound). In a read session the cookie carries the reader instead."""
    if not reader.signed or reader.session or not reader.signed_exp or not reader.origin or settings.link_secret is None:
        return None
    secret, origin = settings.link_secret.get_secret_value(), reader.origin
    expires = datetime.fromtimestamp(reader.signed_exp, UTC)

    def sign(path: str) -> str:  # the daily link's origin under the signature: one client with it (auth.VIA)
        query = signing.sign(day_link_message(origin, path), secret, expires, 0)
        return urlencode({"exp": query["exp"], VIA: origin, "sig": query["sig"]})

    return sign


def _here(request: Request, links: Links) -> str:
    """This page's own path and query (a signed page's signature included): where a form comes back to."""
    query = request.url.query
    return local_path(links.root + app_path(request)) + (f"?{query}" if query else "")


def feedback_forms(request: Request, reader: Reader, settings: Settings, links: Links) -> Forms:
    """The 👍/👎/🤷 forms of this page: signed actions that come back here (web/feedback.py).

    A read session's pages get none: its cookie reaches every analysis of every day, and whoever a push is
    forwarded to holds it, so votes come only from an Airflow login or from the page a link names (a daily
    link's own analyses, whose links it signs), never from the session a link opened."""
    secret = settings.link_secret.get_secret_value() if settings.link_secret and not reader.session else None
    return Forms(secret, get_resources(request).clock.now(), links.root, _here(request, links),
                          reader.signed_exp if reader.signed else None)
