"""Which of the subscribed accounts a day covered: the share the 22:00 report states (the definitions are
docs/operations.md's *Account coverage*).

An account is **active** when WeRSS's account list named it at one of the day's slots (the seven days before,
when the list could not be read all day: none of them covered then). It is **covered** when its article list
was read at one of the slots (not failed, backed off or cut by a deadline) and it is not stalled at the
report's time: not quiet for more than three times its usual interval, and WeRSS not reporting its WeChat
login lapsed. The share is covered / active. Pure: ``digest.coverage_of`` reads what it needs, and the report
keeps the result so a day's page shows what was known then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

# The watchers' rules (watch.py alerts by them; the coverage counts by them), kept here, in a pure room
# that imports nothing of the radar's, so that whatever reads Coverage (decide.py, the pages)
# pulls in neither the store nor the watchers.
SILENT_FACTOR = 3  # an account is quiet when nothing came for more than this many times its usual interval
WECHAT_STATUS = "werss:wechat"  # the service_state key of WeRSS's WeChat login as last checked

FALLBACK_DAYS = 7  # a day WeRSS's account list was never read: the accounts it named in this many days before
NAMES_KEPT = 10  # accounts named in the report per reason


@dataclass(frozen=True)
class Coverage:
    active: int
    covered: int
    unread: list[str] = field(default_factory=list)  # active accounts whose article list no slot of the day read
    stalled: list[str] = field(default_factory=list)  # read, but quiet for more than 3× their usual interval
    login_lapsed: bool = False  # WeRSS reported its WeChat login lapsed: nothing covered
    listed: bool = True  # False: WeRSS's account list was not read that day (active = the week before's)
    unread_count: int = 0  # the lists keep NAMES_KEPT names; these count them all
    stalled_count: int = 0

    @property
    def share(self) -> int | None:
        """Covered / active in whole percent (rounded down: 99.6 % is not everything); None without accounts."""
        return self.covered * 100 // self.active if self.active else None

    def line(self) -> str:
        """The report's and the push's line: ``公众号覆盖 10/12（83%）：2 个未能读取（A、B）``."""
        if not self.active:
            return "公众号覆盖：WeRSS 没有列出任何公众号"
        head = f"公众号覆盖 {self.covered}/{self.active}（{self.share}%）"
        why = []
        if self.login_lapsed:
            why.append("WeRSS 的微信登录已过期，采集已停止")
        if not self.listed:
            why.append("今日未能读取 WeRSS 的公众号列表")
        elif self.unread_count:
            why.append(f"{self.unread_count} 个未能读取（{_names(self.unread, self.unread_count)}）")
        if self.stalled_count and not self.login_lapsed:
            why.append(f"{self.stalled_count} 个久未发文（{_names(self.stalled, self.stalled_count)}）")
        return head + ("：" + "；".join(why) if why else "")

    def as_stats(self) -> dict[str, Any]:
        return {**asdict(self), "unread": self.unread[:NAMES_KEPT], "stalled": self.stalled[:NAMES_KEPT],
                "share": self.share}

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

        unread, stalled = names("unread"), names("stalled")
        return cls(active, covered, unread, stalled, data.get("login_lapsed") is True, data.get("listed") is not False,
                   max(_count(data.get("unread_count")) or 0, len(unread)),
                   max(_count(data.get("stalled_count")) or 0, len(stalled)))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _names(names: list[str], count: int, limit: int = 3) -> str:
    return "、".join(names[:limit]) + (" 等" if count > limit else "")


def summarise(accounts: Iterable[Mapping[str, Any]], stalled_ids: set[int], *, login_lapsed: bool,
              listed: bool = True) -> Coverage:
    """The coverage of a day's ``accounts`` (each ``id``, ``name``, ``read``: its article list was read that
    day), of which ``stalled_ids`` are quiet for far longer than usual."""
    rows = sorted(accounts, key=lambda a: str(a.get("name") or ""))
    unread = [str(a.get("name") or a.get("mp_id") or "") for a in rows if not (listed and a.get("read"))]
    stalled = [str(a.get("name") or a.get("mp_id") or "") for a in rows
               if listed and a.get("read") and a.get("id") in stalled_ids]
    covered = 0 if login_lapsed else len(rows) - len(unread) - len(stalled)
    unread = unread if listed else []
    return Coverage(len(rows), covered, unread, stalled, login_lapsed, listed, len(unread), len(stalled))


def login_lapsed(status: Mapping[str, Any], start: datetime, at: datetime) -> bool:
    """WeRSS's WeChat login, as checked on the day (between ``start`` and ``at``), had lapsed by ``at``."""
    checked = _moment(status.get("checked_at"))
    if not status.get("reported") or checked is None or not start <= checked <= at:
        return False
    expires = _moment(status.get("expires_at"))
    return not status.get("logged_in") or (expires is not None and expires <= at)


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None

