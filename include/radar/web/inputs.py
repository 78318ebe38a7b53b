"""What a request brings, read strictly: the day or the analysis a path names (anything else a 404 page), and
a body bounded before it is read whole.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from fastapi import Request

from include.radar.web.auth import PageError

_DAY_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ID_RE = re.compile(r"[0-9]{1,19}")
_MAX_BIGINT = 2**63 - 1
# Report pages exist from the radar's era to a year ahead; any other date is "no such page", not an error.
FIRST_DAY = date(2000, 1, 1)
DAYS_AHEAD = 366


def parse_day(text: str, today: date) -> date:
    """The report date a ``/daily/`` path names; anything else (not a date, 2026-02-30, year 1) is a 404.

    The range also keeps the page's own date arithmetic (previous and next day) far from ``date``'s limits.
    """
    if _DAY_RE.fullmatch(text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            pass
        else:
            if FIRST_DAY <= day <= today + timedelta(days=DAYS_AHEAD):
                return day
    raise PageError(
        404, "没有这一天的日报", f"日报地址应为 /daily/YYYY-MM-DD，日期在 {FIRST_DAY.isoformat()} 到明年之间，例如 /daily/2026-01-08。"
    )


def parse_id(text: str) -> int:
    """The analysis id an ``/analysis/`` path names (a positive bigint); anything else is a 404."""
    if _ID_RE.fullmatch(text) and 0 < int(text) <= _MAX_BIGINT:
        return int(text)
    raise PageError(404, "找不到这条分析", "分析地址应为 /analysis/ 加正整数编号，例如 /analysis/12。")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes without reading the rest."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PageError(400, "请求无效", "提交的内容过大。")
    return body
