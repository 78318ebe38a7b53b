"""The search page: the form's values checked, and the results as cards with a marked snippet."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from include.radar.core import search
from include.radar.store.searching import Filters
from include.radar.web.auth import PageError
from include.radar.web.views import query
from include.radar.web.views.common import Links, local_time, safe_http_url

PAGE_SIZE = 20
MAX_PAGE = 50
BAND_LABELS = {"": "全部分数", "80": "80 分以上", "60": "60–79 分", "40": "40–59 分", "0": "40 分以下"}


@dataclass(frozen=True)
class SearchForm:
    q: str = ""
    after: str = ""
    before: str = ""
    account: str = ""
    band: str = ""
    watch: bool = False
    page: int = 1

    def filters(self, tz: ZoneInfo) -> Filters:
        start = datetime.combine(date.fromisoformat(self.after), datetime.min.time(), tz) if self.after else None
        end = (datetime.combine(date.fromisoformat(self.before), datetime.min.time(), tz) + timedelta(days=1)
               if self.before else None)
        return Filters(after=start, before=end, account=self.account or None, band=self.band or None, watch=self.watch)

    def url(self, links: Links, page: int) -> str:
        params = {"q": self.q, "from": self.after, "to": self.before, "account": self.account, "band": self.band,
                  "watch": "1" if self.watch else "", "page": str(page)}
        return f"{links.root}/search?" + urlencode({k: v for k, v in params.items() if v})




def _invalid(message: str) -> PageError:
    return PageError(400, "搜索条件无效", message)


def parse_form(params: Any, first: date, last: date) -> SearchForm:
    """The form's query parameters, checked; a PageError (400) says what is wrong. Dates lie between ``first``
    and ``last``; no parameter holds a control character (a NUL cannot even reach the database)."""
    def one(name: str) -> str:
        return query.one(params, name, _invalid)

    q = one("q")
    if len(q) > search.MAX_QUERY_CHARS:
        raise PageError(400, "搜索词过长", f"搜索词最多 {search.MAX_QUERY_CHARS} 个字符，请缩短后再试。")
    band = one("band")
    if band not in BAND_LABELS:
        raise _invalid("分数段只能是页面上列出的选项。")
    page = query.page_number(one("page"), MAX_PAGE, _invalid)
    account = one("account")
    if len(account) > 100:
        raise _invalid("公众号名称过长。")
    after = query.filter_day(one("from"), "开始日期", _invalid, first, last)
    before = query.filter_day(one("to"), "结束日期", _invalid, first, last)
    if after and before and after > before:
        raise _invalid("开始日期晚于结束日期。")
    return SearchForm(q, after, before, account, band, one("watch") == "1", page)


@dataclass(frozen=True)
class Hit:
    title: str
    url: str | None  # the analysis page, or the original article when it has no analysis
    external: bool
    mp_name: str
    published: str
    score: int | None
    status: str  # 已分析 / 待分析 / 分析失败 / 已排除
    snippet: list[tuple[str, bool]]
    watch_hits: list[str] = field(default_factory=list)


STATUS = {0: "待分析", 1: "分析中", 2: "已分析", 3: "分析失败", 4: "按关注设置排除"}


def hits(rows: list[dict[str, Any]], terms: list[str], tz: ZoneInfo, links: Links) -> list[Hit]:
    out = []
    for r in rows:
        analysed = r["analysis_id"] is not None
        source = r["summary"] if analysed and any(t in (r["summary"] or "").lower() for t in terms) else r["text"]
        out.append(Hit(
            title=r["title"] or "（无标题）",
            url=links.analysis(r["analysis_id"]) if analysed else safe_http_url(r["url"]),
            external=not analysed,
            mp_name=r["mp_name"] or "",
            published=local_time(r["published_at"], tz, "%Y-%m-%d %H:%M"),
            score=r["score"],
            status=STATUS.get(r["analyzed_status"], ""),
            # a pruned article (retention) has no text left: its analysis's summary stands in
            snippet=search.highlight(source or r["text"] or r["summary"] or "", terms, 90),
            watch_hits=[h for h in r["watch_hits"] or [] if h],
        ))
    return out
