"""Every tunable of the radar in one typed object (the radar's options plus deployment), and the one reader.

A setting comes from the environment (``AIRFLOW_VAR_RADAR_<NAME>``), then the Airflow Variable
``radar_<name>`` through the reader of the process (a task: :func:`task_lookup`, the Execution API; the
api-server: :func:`server_lookup`, its secrets backends and metadata database), then the default below. The
DAG file reads at parse time only its schedule's few settings, from the environment (:func:`parse_time_lookup`);
where the database is comes from the environment alone (:func:`deployment`). A read that fails (the Execution
API down) raises rather than defaulting; a bad value fails with a message naming the setting and the value.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from include.radar.core import pricing
from include.radar.core.connection_info import airflow_here

SLOT_RE = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


class SettingsError(ValueError):
    """A configuration value is invalid; the message names the setting (and the value, unless it is secret).
    ``setting`` is the setting's name when one value is at fault."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


MIN_LINK_SECRET_BYTES = 32
MIN_RETENTION_DAYS = 14
# the report pages a link's read session may open (link_session_pages), and those it never opens
SESSION_PAGES = ("overview", "daily", "analysis", "weekly", "search", "entity", "trends", "record")
PERSONAL_PAGES = ("profile",)


def secret_problem(value: str, *, header: bool) -> str | None:
    """Why ``value`` cannot be a secret the radar sends, or None. Never quotes the value.

    A secret that travels in an HTTP header (an API key, AK/SK, a signature key) must be printable ASCII
    without spaces: a pasted newline otherwise ends up in an error message that quotes the header. A secret
    sent in a form body (a password) may hold spaces and any character, but not line breaks or control
    characters, nor leading or trailing blanks (a paste error).
    """
    if any(ch in "\r\n" for ch in value):
        return "contains a line break (a paste error?)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "contains a control character"
    if value != value.strip():
        return "has leading or trailing blanks"
    if header and any(ch.isspace() for ch in value):
        return "contains a space"
    if header and not value.isascii():
        return "contains a non-ASCII character"
    return None


def check_secret(value: str | None, what: str, *, header: bool = True) -> str | None:
    """``value`` when it is usable as a secret (or None when absent); else SettingsError naming ``what``."""
    if value is None or value == "":
        return value or None
    problem = secret_problem(value, header=header)
    if problem:
        raise SettingsError(f"{what} {problem}; fix it where it is set (the value is not shown)")
    return value


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # the radar's own options
    window_days: float = Field(3, gt=0, le=30)
    schedule_slots: tuple[str, ...] = ("07:00", "12:00", "14:00", "18:00", "22:00")
    push_score_threshold: int = Field(60, ge=0, le=100)
    # how long an event can still be news: an article joins an event whose first article is at most this old
    event_window_hours: int = Field(72, ge=24, le=168)
    max_articles_per_slot: int = Field(50, ge=1, le=1000)
    deepseek_max_retries: int = Field(3, ge=0, le=10)
    deepseek_content_truncate_chars: int = Field(16000, ge=500, le=200000)
    # DeepSeek calls in flight for a slot, shared by its analysis tasks (DeepSeek's own limit is in the
    # hundreds; the calls wait on the network, so threads, not cores, carry them)
    llm_concurrency: int = Field(16, ge=1, le=128)
    # analysis tasks of a slot that run at once (the Airflow pool radar_llm's slots); each runs
    # ceil(llm_concurrency / analysis_tasks) calls at once in threads
    analysis_tasks: int = Field(2, ge=1, le=16)
    # a pushed link is a bearer credential for its page (a daily link: that day's analyses too) until it expires
    remember_me_days: int = Field(7, ge=1, le=31)
    # a valid pushed link also opens a read session (a cookie) for this long, never past the link's expiry;
    # 0 = off. It opens only the pages named here; the personal ones (/profile) never (web/auth.py)
    link_session_minutes: int = Field(30, ge=0, le=240)
    link_session_pages: tuple[str, ...] = SESSION_PAGES

    # the model and how it is called (DeepSeek retired deepseek-reasoner; the model is configuration)
    deepseek_model: str = Field("deepseek-v4-pro", min_length=1)
    deepseek_thinking: bool = True
    deepseek_reasoning_effort: str = Field("high", pattern=r"^(low|medium|high|max)$")
    deepseek_timeout_seconds: float = Field(180, gt=0, le=1800)  # wall clock per call
    # every call's answer is capped (reasoning included): a runaway answer costs at most this many tokens
    deepseek_max_tokens: int = Field(32768, ge=256, le=65536)
    # what a call costs (include/radar/core/pricing.py): off-peak prices per million tokens as JSON
    # {"cache_hit": .., "cache_miss": .., "output": ..} in deepseek_currency; unset = the published defaults
    # of the configured model. Peak windows are Beijing time; peak = off-peak × deepseek_peak_multiplier.
    deepseek_currency: str = Field("USD", pattern=r"^(USD|CNY)$")
    deepseek_prices: str | None = None
    deepseek_peak_hours: str = pricing.DEFAULT_PEAK_HOURS
    deepseek_peak_multiplier: float = Field(2.0, ge=1, le=10)
    deepseek_peak_since: datetime = datetime.fromisoformat(pricing.DEFAULT_PEAK_SINCE)
    deepseek_peak_weekdays_only: bool = False
    # the slots' LLM spend of a day (Shanghai day, deepseek_currency; not an evaluation's) that stops analyses; 0 = off
    daily_budget: float = Field(0, ge=0)
    # rate limits: waits honouring Retry-After, which cost no attempt, up to this long per article
    deepseek_rate_limit_wait_seconds: float = Field(300, ge=0, le=3600)

    # operations
    # the daily report is pushed at most this long after the daily slot's time, whatever else is happening
    daily_push_deadline_minutes: float = Field(10, ge=0.25, le=120)
    # a Deadline Alert on the daily run (the triggerer alerts the operator when the report is not out by the
    # deadline). Read at parse time (the DAG's test() works around apache/airflow#73428: seam/callbacks.py).
    daily_deadline_alert: bool = True
    # every radar database session: a statement or a lock wait longer than this fails instead of hanging
    db_statement_timeout_seconds: float = Field(60, gt=0, le=3600)
    db_lock_timeout_seconds: float = Field(10, gt=0, le=600)
    max_analysis_attempts: int = Field(3, ge=1, le=20)
    late_after_minutes: int = Field(30, ge=0, le=366 * 24 * 60)
    werss_timeout_seconds: float = Field(20, gt=0, le=300)
    werss_page_size: int = Field(100, ge=1, le=100)
    # an account's listing stops after this many pages (a WeRSS that ignores offset cannot loop forever)
    werss_max_pages: int = Field(20, ge=1, le=1000)
    # the track record (track_record.py): its step's own deadline, the market-data source, the rank's outcome part
    track_record_minutes: float = Field(15, gt=0, le=25)
    market_data_source: str = Field("akshare", pattern=r"^(akshare|recorded)$")
    market_data_timeout_seconds: float = Field(30, gt=0, le=300)
    market_data_recorded_dir: str = ""  # recorded answers (market/recorded.py) when market_data_source=recorded
    market_data_shift_weeks: int = Field(0, ge=-2000, le=2000)  # the recorded answers' dates moved by whole weeks
    outcome_min_picks: int = Field(30, ge=1, le=10000)
    # a daytime push says each coded target's move since its article (pushes/context.py), waiting this long
    # at most for the market-data source; off, it says nothing of prices and asks no source
    push_market_context: bool = True
    push_market_seconds: float = Field(4, gt=0, le=20)
    # retention (retention.py): the daily slot prunes article bodies older than this many days (titles, analyses,
    # pushes, feedback and the track record are kept); 0 keeps everything. Never under MIN_RETENTION_DAYS: the
    # window, the grouping of events and the weekly summary read the last week's bodies
    retention_days: int = Field(180, ge=0, le=36500)
    # warn the operator this many hours before WeRSS's WeChat login lapses (when WeRSS reports it); 0 = no warning
    wechat_login_warn_hours: float = Field(24, ge=0, le=240)
    report_base_url: str = "http://localhost:8080/radar"
    # HMAC secret of the signed links in pushes; without it links need an Airflow login
    link_secret: SecretStr | None = None
    demo_mode: bool = False

    # Airflow connection ids
    werss_conn_id: str = "werss_default"
    deepseek_conn_id: str = "deepseek_default"
    push_conn_id: str = "radar_push"
    # the operator's alerts; without this connection they go to the reader's channels, prefixed 运维
    ops_push_conn_id: str = "radar_ops_push"
    db_conn_id: str = "radar_db"

    @field_validator("schedule_slots", mode="before")
    @classmethod
    def _parse_slots(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else [s.strip() for s in text.split(",") if s.strip()]
        return value

    @field_validator("schedule_slots")
    @classmethod
    def _check_slots(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one slot is required")
        for slot in value:
            if not SLOT_RE.match(slot):
                raise ValueError(f"slot {slot!r} is not a HH:MM time of day")
        if len(set(value)) != len(value):
            raise ValueError("slots repeat")
        return tuple(sorted(value))

    @field_validator("link_session_pages", mode="before")
    @classmethod
    def _parse_pages(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("link_session_pages")
    @classmethod
    def _check_pages(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for page in value:
            if page in PERSONAL_PAGES:
                raise ValueError(f"{page!r} is personal: a link never opens it (log in to Airflow for it)")
            if page not in SESSION_PAGES:
                raise ValueError(f"{page!r} is not one of {', '.join(SESSION_PAGES)}")
        return tuple(dict.fromkeys(value))

    @field_validator("retention_days")
    @classmethod
    def _check_retention(cls, value: int) -> int:
        if 0 < value < MIN_RETENTION_DAYS:
            raise ValueError(f"retention_days must be 0 (keep everything) or at least {MIN_RETENTION_DAYS}: the "
                             "window, event grouping and the weekly summary read the last week's article bodies")
        return value

    @field_validator("link_secret", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("link_secret")
    @classmethod
    def _check_link_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        secret = value.get_secret_value()
        problem = secret_problem(secret, header=True)
        if problem:
            raise ValueError(problem)
        if len(secret.encode()) < MIN_LINK_SECRET_BYTES:
            raise ValueError(
                f"must be at least {MIN_LINK_SECRET_BYTES} bytes (it signs the links in pushes); make one with "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        return value

    @field_validator("report_base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("must be an absolute http(s) URL")
        return value.rstrip("/")

    @field_validator("deepseek_prices", mode="before")
    @classmethod
    def _empty_prices_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("deepseek_prices")
    @classmethod
    def _check_prices(cls, value: str | None) -> str | None:
        if value is not None:
            pricing.parse_rates(value)
        return value

    @field_validator("deepseek_peak_hours")
    @classmethod
    def _check_peak_hours(cls, value: str) -> str:
        pricing.parse_windows(value)
        return value

    @field_validator("deepseek_peak_since")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("needs a time zone, e.g. 2026-08-16T16:00:00+00:00")
        return value

    def price_table(self) -> pricing.PriceTable:
        """What a call of the configured model costs, at any moment (peak or off-peak)."""
        return pricing.table_for(
            self.deepseek_model, self.deepseek_currency, self.deepseek_prices,
            peak_multiplier=self.deepseek_peak_multiplier, peak_windows=pricing.parse_windows(self.deepseek_peak_hours),
            peak_since=self.deepseek_peak_since, peak_weekdays_only=self.deepseek_peak_weekdays_only,
        )

    @property
    def daily_slot(self) -> str:
        """The last slot of the day builds and always pushes the daily report (22:00 by default)."""
        return self.schedule_slots[-1]

    @property
    def cron(self) -> str:
        """A cron expression firing at every slot, for slots that share their minute."""
        minutes = {s[3:] for s in self.schedule_slots}
        if len(minutes) != 1:
            raise SettingsError(f"schedule_slots={list(self.schedule_slots)!r}: slots must share their minute")
        hours = ",".join(str(int(s[:2])) for s in self.schedule_slots)
        return f"{int(minutes.pop())} {hours} * * *"


SETTING_NAMES: tuple[str, ...] = tuple(Settings.model_fields)
SECRET_SETTINGS = frozenset(n for n, f in Settings.model_fields.items() if "SecretStr" in str(f.annotation))


# settings that were replaced: a leftover is refused rather than silently ignored
RENAMED = {
    "deepseek_price_input_cache_hit": "deepseek_prices (JSON, off-peak, with deepseek_currency)",
    "deepseek_price_input_cache_miss": "deepseek_prices (JSON, off-peak, with deepseek_currency)",
    "deepseek_price_output": "deepseek_prices (JSON, off-peak, with deepseek_currency)",
}


def env_name(name: str) -> str:
    return f"AIRFLOW_VAR_RADAR_{name.upper()}"


Lookup = Callable[[str], "str | None"]

# what locates the database, read from the environment alone (see the module's docstring)
DEPLOYMENT = {
    "RADAR_DATABASE_URL": "the radar database of the tasks (else the radar_db connection, else an embedded one)",
    "RADAR_PAGES_DATABASE_URL": "the report pages' own read-only login (else the tasks' database URL)",
    "RADAR_PGDATA": "where the embedded PostgreSQL keeps its data (else .local/pgdata)",
    "RADAR_ADMIN_DATABASE_URL": "the PostgreSQL superuser, for cli provision only",
    "RADAR_AIRFLOW_DB_NAME": "the database of Airflow's metadata beside the radar's (cli airflow-db-url; else airflow)",
    "RADAR_MCP_OWNER_TOKEN": "the MCP server's bearer token that sees what an Airflow login sees (docs/mcp.md)",
    "RADAR_MCP_READ_TOKEN": "the MCP server's bearer token that sees what a pushed link's read session sees",
    "RADAR_MCP_TOKEN": "the token an MCP client over stdio starts the server with (one of the two above)",
}


def deployment(name: str) -> str | None:
    """The environment's value of one of :data:`DEPLOYMENT` (None when unset or empty)."""
    if name not in DEPLOYMENT:
        raise KeyError(f"{name} is not a deployment variable of the radar")
    return os.environ.get(name) or None


def environment(name: str) -> str | None:
    """The raw value of setting ``name`` in the environment (step 1 of the order)."""
    return os.environ.get(env_name(name))


def parse_time_lookup(names: tuple[str, ...]) -> Lookup:
    """What the DAG file reads at parse time: ``names`` from the environment, nothing else."""
    return lambda name: environment(name) if name in names else None


def task_lookup(use_airflow: bool = True) -> Lookup:
    """The order of a task (or a script): the environment, then (``use_airflow``) the task's Variables, listed
    once on the first setting the environment does not hold."""
    variables: Lookup | None = None

    def lookup(name: str) -> str | None:
        nonlocal variables
        value = environment(name)
        if value is None and use_airflow:
            if variables is None:
                variables = _airflow_variables() or _metadata_variables() or (lambda _: None)
            value = variables(name)
        return value

    return lookup


def _metadata_variables() -> Lookup | None:
    """Outside a task, in a process that reads Airflow's metadata database as Airflow's own servers and
    commands do (``_AIRFLOW_PROCESS_CONTEXT=server``: the radar's cli, see :func:`airflow_server_context`), the
    Variables stored there and in the secrets backends; None elsewhere. A failed read is a SettingsError, never
    "not set"."""
    if os.environ.get("_AIRFLOW_PROCESS_CONTEXT") != "server":
        return None
    variable = _server_variable()
    if variable is None:
        return None

    def lookup(name: str) -> str | None:
        try:
            found = variable.get(f"radar_{name}", default_var=None)
        except Exception as exc:  # the metadata database down, a backend refusing
            raise SettingsError(f"Airflow Variable radar_{name} could not be read ({type(exc).__name__}: "
                                f"{str(exc)[:200]}): check this AIRFLOW_HOME's metadata database") from None
        return None if found is None else str(found)

    return lookup


@contextmanager
def airflow_server_context() -> Iterator[None]:
    """Within it, this process reads connections and Variables as Airflow's scheduler and commands do: its
    metadata database and secrets backends, not only the environment (a process outside a task otherwise sees
    the environment alone). Where a context is already set (a task, a server), it is kept."""
    if "_AIRFLOW_PROCESS_CONTEXT" in os.environ:
        yield
        return
    os.environ["_AIRFLOW_PROCESS_CONTEXT"] = "server"
    try:
        yield
    finally:
        os.environ.pop("_AIRFLOW_PROCESS_CONTEXT", None)


def server_lookup(name: str) -> str | None:
    """The order of the api-server: the environment, then ``Variable.get`` of ``airflow.models``, the
    api-server's own reader (the configured secrets backends, the environment backend and the metadata
    database, in Airflow's order; a backend that fails is logged and skipped by Airflow itself). Errors other
    than Airflow being absent are raised: a silently defaulted ``link_secret`` would refuse every pushed link."""
    value = environment(name)
    if value is not None:
        return value
    variable = _server_variable()
    if variable is None:
        return None
    found = variable.get(f"radar_{name}", default_var=None)
    return None if found is None else str(found)


@cache
def _server_variable() -> Any:
    """``airflow.models.variable.Variable``, or None without Airflow (imported on first use: it is slow)."""
    if not airflow_here():
        return None
    try:
        from airflow.models.variable import Variable
    except ImportError:
        return None
    return Variable


def _airflow_variables() -> Lookup | None:
    """A lookup of the Airflow Variables ``radar_<name>``; None outside a task.

    One Execution API call lists the ``radar_`` Variables stored in Airflow, and only those are read (one
    call each): asking for each of some forty settings in turn cost every task about 0.25 s. With a secrets
    backend of your own configured (which the listing does not see), every setting is asked for in turn.
    Inside a task an error reading them (the Execution API down) is raised, not taken for "not set": a
    silently defaulted secret or base URL would send unsigned links to the wrong host.
    """
    if not airflow_here():
        return None
    try:
        from airflow.sdk import Variable, get_current_context
    except ImportError:  # plain Python: no Airflow installed
        return None
    try:
        get_current_context()
    except Exception:  # no task context (api-server, scripts, tests): environment and defaults
        return None
    stored: set[str] | None = None
    if not _custom_secrets_backend():
        stored = set(Variable.keys(prefix="radar_"))

    def lookup(name: str) -> str | None:
        key = f"radar_{name}"
        if stored is not None and key not in stored:
            return None
        return Variable.get(key, default=None)

    return lookup


def _custom_secrets_backend() -> bool:
    from airflow.sdk.configuration import conf

    return bool(conf.get("secrets", "backend", fallback="") or conf.get("workers", "secrets_backend", fallback=""))


def load_settings(lookup: Lookup | None = None, *, use_airflow: bool = True, **overrides: Any) -> Settings:
    """Build the settings; ``lookup`` maps a setting name to its raw string: :func:`server_lookup`,
    :func:`parse_time_lookup`, a test's dict.get; without one, :func:`task_lookup` (``use_airflow``)."""
    read = lookup or task_lookup(use_airflow)
    raw: dict[str, Any] = {}
    for name in SETTING_NAMES:
        value = read(name)
        if value is not None:
            raw[name] = value
    raw.update(overrides)
    for old, new in RENAMED.items():
        if (lookup or environment)(old) is not None:
            raise SettingsError(f"the setting {old} ({env_name(old)}) is gone: use {new} instead")
    try:
        settings = Settings(**raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        name = str(first["loc"][0]) if first["loc"] else "?"
        value = raw.get(name, first.get("input"))
        shown = "<secret>" if name in SECRET_SETTINGS else repr(value)
        raise SettingsError(
            f"invalid setting {name}={shown} ({env_name(name)} or Airflow Variable radar_{name}): {message}",
            name if name in Settings.model_fields else None,
        ) from None
    if settings.link_secret is not None:
        from include.radar.core import redact

        redact.register(settings.link_secret.get_secret_value())
    return settings
