"""What a WeRSS row must look like before the radar stores it. Pure: no I/O.

WeRSS hands over rows scraped from WeChat; any field can be missing, of the wrong type, absurd or
unstorable. A row that fails here is skipped with a reason (counted on the slot and the account), and the
rows beside it go on: one bad row costs that row only.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from include.radar.core.text import unstorable

# publish times before this are absurd for WeChat articles (the platform started in 2012)
EARLIEST_PUBLISH = datetime(2000, 1, 1, tzinfo=UTC)
# publish times later than now plus this are absurd (a clock a little ahead is not)
FUTURE_TOLERANCE = timedelta(days=1)
MAX_ID_CHARS = 200
MAX_TITLE_CHARS = 500
MAX_URL_CHARS = 2000


class RowRejected(ValueError):
    """A row that cannot be stored; the message is the reason counted on the slot and the account."""


def _identifier(value: Any, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{field} is {type(value).__name__}, not a string")
    text = str(value).strip()
    if not text:
        raise ValueError(f"{field} is empty")
    if len(text) > MAX_ID_CHARS or any(ord(ch) < 32 for ch in text) or unstorable(text):
        raise ValueError(f"{field} is not a plausible id")
    return text


def _text(value: Any, field: str, limit: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{field} is {type(value).__name__}, not text")
    text = str(value)
    if problem := unstorable(text):
        raise ValueError(f"{field} contains a {problem}")
    return text.strip()[:limit]


def publish_seconds(value: Any, now: datetime) -> int:
    """WeRSS's publish_time as Unix seconds (milliseconds when above 10^10), within a plausible range."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"publish_time is {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError("publish_time is not a number") from None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"publish_time {value!r} is not a finite number")
    seconds = int(value)
    if seconds > 10**10:
        seconds //= 1000
    if seconds < EARLIEST_PUBLISH.timestamp():
        raise ValueError(f"publish_time {value!r} is before {EARLIEST_PUBLISH.year}")
    if seconds > (now + FUTURE_TOLERANCE).timestamp():
        raise ValueError(f"publish_time {value!r} is in the future")
    return seconds


class ArticleRow(BaseModel):
    """One article of the list (or its detail); validate with ``context={"now": datetime}``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    mp_id: str
    title: str = ""
    url: str = ""
    publish_time: int

    @field_validator("id", "mp_id", mode="before")
    @classmethod
    def _ids(cls, value: Any, info: ValidationInfo) -> str:
        return _identifier(value, info.field_name or "id")

    @field_validator("title", mode="before")
    @classmethod
    def _title(cls, value: Any) -> str:
        return _text(value, "title", MAX_TITLE_CHARS)

    @field_validator("url", mode="before")
    @classmethod
    def _url(cls, value: Any) -> str:
        return _text(value, "url", MAX_URL_CHARS)

    @field_validator("publish_time", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> int:
        now = (info.context or {}).get("now")
        if not isinstance(now, datetime):
            raise ValueError("an ArticleRow is validated with context={'now': datetime}")
        return publish_seconds(value, now)

    @property
    def published_at(self) -> datetime:
        return datetime.fromtimestamp(self.publish_time, UTC)


class AccountRow(BaseModel):
    """One subscribed account (``/mps`` list row)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    mp_name: str = ""

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> str:
        return _identifier(value, "id")

    @field_validator("mp_name", mode="before")
    @classmethod
    def _name(cls, value: Any) -> str:
        return _text(value, "mp_name", MAX_TITLE_CHARS)

    @property
    def name(self) -> str:
        return self.mp_name or self.id


def article_row(row: Any, *, mp_id: str, now: datetime) -> ArticleRow:
    """Validate one article row of account ``mp_id``; raises RowRejected with a one-line reason."""
    if not isinstance(row, dict):
        raise RowRejected(f"article row is {type(row).__name__}, not an object")
    try:
        return ArticleRow.model_validate({"mp_id": mp_id, **row}, context={"now": now})
    except ValidationError as exc:
        raise RowRejected(f"article {_row_id(row)}: {_reason(exc)}") from None


def account_row(row: Any) -> AccountRow:
    if not isinstance(row, dict):
        raise RowRejected(f"account row is {type(row).__name__}, not an object")
    try:
        return AccountRow.model_validate(row)
    except ValidationError as exc:
        raise RowRejected(f"account {_row_id(row)}: {_reason(exc)}") from None


def _reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    field = ".".join(str(p) for p in first.get("loc", ()))
    return message if field and message.startswith(field) else f"{field}: {message}" if field else message


def _row_id(row: dict[str, Any]) -> str:
    """The row's id for a message: printable and short whatever it holds."""
    value = row.get("id")
    text = value if isinstance(value, str) else repr(value)
    text = "".join(ch if ch.isprintable() and not unstorable(ch) else "?" for ch in text)
    return repr(text[:40])


def synced_at(row: Any, now: datetime) -> datetime | None:
    """When WeRSS last started collecting an account (its record's ``sync_time``, Unix seconds); None for 0
    (never), a missing or an implausible value."""
    value = row.get("sync_time") if isinstance(row, dict) else None
    try:
        return datetime.fromtimestamp(publish_seconds(value, now), UTC)
    except ValueError:
        return None


def local_moment(value: Any, tz: Any) -> datetime | None:
    """A moment WeRSS wrote as ISO text (``created_at``, ``updated_at``), in its local time zone ``tz`` when the
    text carries no offset; None when missing, unreadable or implausible."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace(" ", "T", 1))
    except ValueError:
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=tz)
    return moment if EARLIEST_PUBLISH < moment else None
