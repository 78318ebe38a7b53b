"""Which of the subscribed accounts a day covered: the share the 22:00 report states (the definitions are
docs/operations.md's *Account coverage*).

An account is **active** when WeRSS's account list named it at one of the day's slots (the seven days before,
when the list could not be read all day: none of them covered then). It is **covered** only on evidence that
WeRSS is collecting it: its article list was read at one of the slots (not failed, backed off or cut by a
deadline), WeRSS holds a valid WeChat login, and either an article of it is within its rhythm (three times its
usual interval, at least a day; three days while its interval is unknown) or WeRSS's own record says a
collection reached it in the last day. An account with no article and no such collection is **not yet
collected**; one whose articles stopped is **stalled**. The share is covered / active. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

# The watchers' rules (watch.py alerts by them; the coverage counts by them), kept here, in a pure room
# that imports nothing of the radar's, so that whatever reads Coverage (decide.py, the pages)
# pulls in neither the store nor the watchers.
SILENT_FACTOR = 3  # an account is quiet when nothing came for more than this many times its usual interval
MIN_RHYTHM = timedelta(hours=24)  # no account is quiet sooner
UNKNOWN_RHYTHM = timedelta(days=3)  # an account whose interval is not known yet (fewer than four articles)
SYNC_FRESH = timedelta(hours=26)  # WeRSS's collection counts for a day (and the daily run's lateness)
WECHAT_STATUS = "werss:wechat"  # the service_state key of WeRSS's WeChat login as last checked

FALLBACK_DAYS = 7  # a day WeRSS's account list was never read: the accounts it named in this many days before
NAMES_KEPT = 10  # accounts named in the report per reason

LOGIN_OK, LOGIN_LAPSED, LOGIN_UNSCANNED = "ok", "lapsed", "unscanned"


@dataclass(frozen=True)
class Coverage:
    active: int
    covered: int
    unread: list[str] = field(default_factory=list)  # active accounts whose article list no slot of the day read
    stalled: list[str] = field(default_factory=list)  # read, articles stopped, no collection in the last day
    login_lapsed: bool = False  # WeRSS reported its WeChat login lapsed: nothing covered
    listed: bool = True  # False: WeRSS's account list was not read that day (active = the week before's)
    unread_count: int = 0  # the lists keep NAMES_KEPT names; these count them all
    stalled_count: int = 0
    uncollected: list[str] = field(default_factory=list)  # read, but WeRSS has collected nothing of them yet
    uncollected_count: int = 0
    unscanned: bool = False  # WeRSS holds no WeChat login at all (its QR code never scanned): nothing covered

    @property
    def share(self) -> int | None:
        """Covered / active in whole percent (rounded down: 99.6 % is not everything); None without accounts."""
        return self.covered * 100 // self.active if self.active else None

    @property
    def nothing_collected(self) -> bool:
        """No account covered, and nothing else to explain it: a lapsed or missing WeChat login, or an account list
        no slot could read (WeRSS down: each has a line and an alert of its own)."""
        return bool(self.active) and self.listed and not self.covered and not (self.login_lapsed or self.unscanned)

    def line(self) -> str:
        """The report's and the push's line: ``公众号覆盖 10/12（83%）：2 个未能读取（A、B）``."""
        if not self.active:
            return "公众号覆盖：WeRSS 没有列出任何公众号"
        head = f"公众号覆盖 {self.covered}/{self.active}（{self.share}%）"
        why = ["WeRSS 没有在采集：没有任何公众号有采集到的迹象"] if self.nothing_collected else []
        if self.unscanned:
            why.append("WeRSS 还没有扫码登录微信，采集不到文章")
        elif self.login_lapsed:
            why.append("WeRSS 的微信登录已过期，采集已停止")
        if not self.listed:
            why.append("今日未能读取 WeRSS 的公众号列表")
        elif self.unread_count:
            why.append(f"{self.unread_count} 个未能读取（{_names(self.unread, self.unread_count)}）")
        if self.uncollected_count:
            why.append(f"{self.uncollected_count} 个尚未采集到文章（{_names(self.uncollected, self.uncollected_count)}）")
        if self.stalled_count and not (self.login_lapsed or self.unscanned):
            why.append(f"{self.stalled_count} 个久未发文（{_names(self.stalled, self.stalled_count)}）")
        return head + ("：" + "；".join(why) if why else "")

    def as_stats(self) -> dict[str, Any]:
        return {**asdict(self), "unread": self.unread[:NAMES_KEPT], "stalled": self.stalled[:NAMES_KEPT],
                "uncollected": self.uncollected[:NAMES_KEPT], "share": self.share}

    @classmethod
    def from_stats(cls, data: Any) -> Coverage | None:
        """A report's stored coverage (stats ``coverage``), read defensively; None when absent or unreadable."""
        if not isinstance(data, Mapping):
            return None
        active, covered = _count(data.get("active")), _count(data.get("covered"))
        if active is None or covered is None or covered > active:
            return None

        def names(key: str) -> list[str]:
            raw = data.get(key)
            return [str(n).strip()[:60] for n in raw if isinstance(n, str | int) and str(n).strip()][:NAMES_KEPT] \
                if isinstance(raw, list) else []

        def counted(key: str, listed: list[str]) -> int:
            return max(_count(data.get(key)) or 0, len(listed))

        unread, stalled, uncollected = names("unread"), names("stalled"), names("uncollected")
        return cls(active, covered, unread, stalled, data.get("login_lapsed") is True, data.get("listed") is not False,
                   counted("unread_count", unread), counted("stalled_count", stalled), uncollected,
                   counted("uncollected_count", uncollected), data.get("unscanned") is True)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _names(names: list[str], count: int, limit: int = 3) -> str:
    return "、".join(names[:limit]) + (" 等" if count > limit else "")


def evidence(account: Mapping[str, Any], at: datetime) -> str | None:
    """What says WeRSS is collecting ``account`` as of ``at``: ``"article"`` (its newest article is within its
    rhythm), ``"collection"`` (WeRSS's record says a collection reached it in the last day), else None."""
    synced = account.get("synced_at")
    if isinstance(synced, datetime) and timedelta(0) <= at - synced <= SYNC_FRESH:
        return "collection"
    last, cadence = account.get("last_article_at"), account.get("cadence")
    rhythm = max(cadence * SILENT_FACTOR, MIN_RHYTHM) if isinstance(cadence, timedelta) and cadence else UNKNOWN_RHYTHM
    if isinstance(last, datetime) and at - last <= rhythm:
        return "article"
    return None


def summarise(accounts: Iterable[Mapping[str, Any]], *, at: datetime, login: str = LOGIN_OK,
              listed: bool = True) -> Coverage:
    """The coverage as of ``at`` of a day's ``accounts`` (each ``id``, ``name``, ``read``: its article list was
    read that day, and what :func:`evidence` reads), with WeRSS's WeChat ``login`` as :func:`login_state` says."""
    rows = sorted(accounts, key=lambda a: str(a.get("name") or ""))

    def name(a: Mapping[str, Any]) -> str:
        return str(a.get("name") or a.get("mp_id") or "")

    read = [a for a in rows if listed and a.get("read")]
    unread = [name(a) for a in rows if not (listed and a.get("read"))] if listed else []
    collected = [a for a in read if evidence(a, at)]
    uncollected = [name(a) for a in read if not evidence(a, at) and not a.get("last_article_at")]
    stalled = [name(a) for a in read if not evidence(a, at) and a.get("last_article_at")]
    covered = len(collected) if login == LOGIN_OK else 0
    return Coverage(len(rows), covered, unread, stalled, login == LOGIN_LAPSED, listed, len(unread), len(stalled),
                    uncollected, len(uncollected), login == LOGIN_UNSCANNED)


def login_state(status: Mapping[str, Any], start: datetime, at: datetime) -> str:
    """WeRSS's WeChat login, as checked on the day (between ``start`` and ``at``): ``unscanned`` (no WeChat
    token at all), ``lapsed`` (by ``at``), else ``ok`` (valid, or not reported, or not checked that day)."""
    checked = _moment(status.get("checked_at"))
    if not status.get("reported") or checked is None or not start <= checked <= at:
        return LOGIN_OK
    if status.get("scanned") is False:
        return LOGIN_UNSCANNED
    expires = _moment(status.get("expires_at"))
    return LOGIN_LAPSED if not status.get("logged_in") or (expires is not None and expires <= at) else LOGIN_OK


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None
