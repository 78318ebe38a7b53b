"""What every step of a slot needs, resolved inside the task (never at DAG parse time), and the one way a step
runs: :class:`Runtime` (settings, database and clock from the one loader, loader.py; the WeRSS and DeepSeek clients, push channels, operator alerts
and signed links built from Airflow connections; the sweep of pushes whose sender died); :func:`step`, which
records a step's outcome on the slot run (so ``close_slot`` judges the slot from the database) and turns a
failure past the daily deadline into :class:`DeadlinePassed`; the slot record's key and deadlines; and
:func:`not_retryable`, the errors the seam to Airflow fails without retries. Nothing here imports the steps
(include/radar/steps/) or Airflow.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, TypeVar

from include.radar import store
from include.radar.analysis.llm import LLMClient, LLMConfigError, RateGate
from include.radar.analysis.spending import Asking
from include.radar.collect.werss import WeRSSAuthError, WeRSSClient
from include.radar.core import loader, signing
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.deadlines import SlotDeadlines, retry_is_pointless
from include.radar.core.settings import SettingsError
from include.radar.core.slots import SlotKey
from include.radar.operations import alerts
from include.radar.operations import connections as readers
from include.radar.operations.connections import ConfigurationError
from include.radar.pushes import push

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


class DeadlinePassed(RuntimeError):
    """A step failed after its phase of the daily deadline: a retry would only delay the report."""


def not_retryable() -> tuple[type[Exception], ...]:
    """The errors a retry cannot fix: wrong credentials or configuration, a deadline already passed."""
    return WeRSSAuthError, LLMConfigError, SettingsError, ConfigurationError, push.PushConfigError, DeadlinePassed


@dataclass(frozen=True)
class Runtime(loader.Loaded):
    """What a step needs, resolved inside the task (never at DAG parse time): what the loader gives, and the
    clients, channels, alerts and links built from it."""

    clock: Clock = SYSTEM  # what the steps read the time on: a test's or a script's own moment

    @classmethod
    def load(cls, clock: Clock | None = None) -> Runtime:
        loaded = loader.load(clock=clock)
        return cls(loaded.settings, loaded.database_url, loaded.clock)

    def connect(self, **bounds: Any) -> Any:
        # the analyse task's threads each hold one while storing, plus its claim keeper and the step records
        return super().connect(pool_size=self.settings.llm_concurrency + 4, **bounds)

    def werss(self) -> WeRSSClient:
        # ingest.py cleans HTML (bs4 and lxml, 13 MB): only the task that ingests loads it, not every step,
        # nor the triggerer running the Deadline Alert's callback (make bench-memory)
        from include.radar.collect import ingest

        conn = readers.required(self.settings.werss_conn_id, "WeRSS")
        cache = ingest.db_token_cache(self.connect, f"werss:token:{readers.base_url(conn)}:{conn.login}")
        return readers.werss_client(self.settings, token_cache=cache, clock=self.clock)

    def llm(self, gate: RateGate | None = None, *, connections: int = 20) -> LLMClient:
        return readers.llm_client(self.settings, gate, connections=connections, clock=self.clock)

    def asking(self, slot_run_id: int | None, deadline: float | None = None,
               llm: Callable[[], LLMClient] | None = None) -> Asking:
        """What a step's LLM calls take: this runtime's database, client (or ``llm``'s), settings and clock."""
        return Asking(self.connect, llm or self.llm, self.settings, slot_run_id, deadline, self.clock)

    def channels(self, conn_id: str | None = None) -> list[push.Channel]:
        return readers.channels(conn_id or self.settings.push_conn_id)

    def operator_channels(self) -> tuple[list[push.Channel], bool]:
        return readers.operator_channels(self.settings)

    def alert(self, cause: str, detail: str, slot: dict[str, Any] | None = None, *, day_of: datetime | None = None) -> str:
        """Tell the operator (once per cause and day, the day of ``day_of``, default now; never raises)."""
        return alerts.raise_alert(
            self.connect, self.operator_channels, cause=cause, detail=detail, link=self.canonical_url("/"),
            slot_run_id=(slot or {}).get("slot_run_id"), dag_run_id=(slot or {}).get("dag_run_id"),
            now=day_of or self.clock.now(),
        )

    def page_url(self, path: str, now: datetime | None = None) -> str:
        secret = self.settings.link_secret.get_secret_value() if self.settings.link_secret else None
        return signing.page_url(
            self.settings.report_base_url, path, secret, now or self.clock.now(), self.settings.remember_me_days
        )

    def canonical_url(self, path: str) -> str:
        return self.settings.report_base_url + path

    def sweep_pushes(self, slot: dict[str, Any]) -> push.SweepReport | None:
        """Account for the pushes whose sender died (push.sweep): delivered, failed, or delivery unknown — then
        tell the operator, once per cause and day, of any that could not be delivered or whose delivery is unknown.
        Run by every slot's push step and by close_slot; never raises (it must not cost the slot its push)."""
        try:
            channels = [*self.channels(), *self.channels(self.settings.ops_push_conn_id)]
            report = push.sweep(self.connect, channels, stale_after=timedelta(minutes=self.settings.late_after_minutes),
                                now=self.clock.now())
        except Exception:  # the next push step or close tries again
            log.exception("sweeping the pending pushes failed")
            return None

        def listed(rows: list[dict[str, Any]]) -> str:
            return "；".join(f"{r['report_date']} {r['slot']} {r['push_type']}「{r['title']}」→ {r['channel']}"
                            + (f"（{r['error']}）" if r.get("error") and r["status"] != store.common.NOTE_UNKNOWN else "")
                            for r in rows[:5]) + (f" 等 {len(rows)} 条" if len(rows) > 5 else "")

        if report.unknown:
            self.alert("push_unknown", f"发送已开始、结果未记录的推送：{listed(report.unknown)}", slot)
        if report.failed:
            self.alert("push_undelivered", f"发送进程中断后未能送达的推送：{listed(report.failed)}", slot)
        return report


def step(name: str | Callable[..., str]) -> Callable[[F], F]:
    """Record a step's outcome on the slot run: its error when it raises, cleared when it succeeds.

    The step name is the DAG task id (``analyse:<item id>`` for the mapped task), so close_slot can tell a
    failure a step recorded from one Airflow saw without a record.
    """

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(rt: Runtime, slot: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            label = name(*args, **kwargs) if callable(name) else name
            try:
                result = func(rt, slot, *args, **kwargs)
            except Exception as exc:
                try:
                    with rt.connect() as conn:
                        store.slot_runs.record_step(conn, slot["slot_run_id"], label, f"{exc.__class__.__name__}: {exc}",
                                          dag_run_id=slot.get("dag_run_id"))
                except Exception:  # the database may be what failed; keep the original error
                    log.exception("could not record the failure of step %s", label)
                if retry_is_pointless(label, deadlines(slot), rt.clock.now()):
                    raise DeadlinePassed(
                        f"{label} failed at the end of its share of the daily deadline ({exc.__class__.__name__}: "
                        f"{exc}); not retried, so that the daily report goes out on time"
                    ) from exc
                raise
            with rt.connect() as conn:
                store.slot_runs.record_step(conn, slot["slot_run_id"], label, None)
            return result

        return run  # type: ignore[return-value]

    return wrap


def deadlines(slot: dict[str, Any]) -> SlotDeadlines:
    return SlotDeadlines.from_xcom(slot.get("deadlines"))


def step_deadline(slot: dict[str, Any], step_name: str, clock: Clock) -> float | None:
    """The end of ``step_name``'s phase as a ``clock.monotonic()`` value (what the clients count in), or None."""
    at = deadlines(slot).for_step(step_name)
    if at is None:
        return None
    return clock.monotonic() + (at - clock.now()).total_seconds()


def slot_key(slot: dict[str, Any]) -> SlotKey:
    """The slot a step's record stands for."""
    return SlotKey(date.fromisoformat(slot["run_date"]), slot["slot"], datetime.fromisoformat(slot["scheduled_at"]))
