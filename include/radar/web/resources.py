"""The app's resources every route reaches through the request (``get_resources(request)``): settings (briefly
cached), the database, the clock, the learned ranking weights, the keys kept in the database; and the one
business time zone. ``create_app`` (app.py) makes them per app, so the route modules hold no state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from fastapi import Request

from include.radar import store
from include.radar.core import db, loader
from include.radar.core.clock import Clock
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI
from include.radar.pushes import ranking
from include.radar.web.admission import AT_ONCE

# Settings come from Airflow Variables (a metadata-DB read each) or the environment: cache them briefly.
SETTINGS_TTL_SECONDS = 60.0
# a connection per page request the api-server serves at once (web/admission.py bounds them)
PAGES_POOL_SIZE = AT_ONCE


class AppResources:
    """Per-app state resolved lazily: settings (briefly cached), the database URL, the clock, the ranking weights,
    the keys the radar keeps in its database (the profile form's, web/csrf.py).

    Lazy because the plugin module is imported by every Airflow component at start-up, where reaching the
    database or reading Variables would be wrong; cached because a page must not pay for either each time.
    """

    def __init__(
        self, settings_loader: Callable[[], Settings], db_url: str | None, clock: Clock
    ) -> None:
        self._settings_loader = settings_loader
        self._db_url = db_url
        self.clock = clock
        self._lock = threading.Lock()
        self._settings: Settings | None = None
        self._resolved_url: str | None = None
        self._loaded_at = 0.0
        self._weights: tuple[tuple[Any, ...], float, ranking.Weights] | None = None
        self._kept: dict[str, str] = {}

    def _refresh(self) -> None:
        with self._lock:
            if self._settings is not None and self.clock.monotonic() - self._loaded_at < SETTINGS_TTL_SECONDS:
                return
            settings = self._settings_loader()
            url = self._db_url
            if url is None:
                try:
                    url = loader.load(settings=settings, clock=self.clock, pages=True).database_url
                except Exception as exc:  # any failure to locate it is "unreachable"
                    raise db.DatabaseUnavailable(f"cannot locate the radar database: {type(exc).__name__}") from exc
            self._settings, self._resolved_url, self._loaded_at = settings, url, self.clock.monotonic()

    def settings(self) -> Settings:
        self._refresh()
        assert self._settings is not None
        return self._settings

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection]:
        """One read-only connection for the whole request, with a statement timeout as a backstop. Read-only
        by the transaction here; by its privileges too where the pages have a login of their own (roles.py)."""
        self._refresh()
        assert self._resolved_url is not None
        with db.connect(self._resolved_url, pool_size=PAGES_POOL_SIZE) as conn:
            conn.execute("SET TRANSACTION READ ONLY; SET LOCAL statement_timeout = '5s'")
            yield conn

    def ranking_weights(self, conn: psycopg.Connection) -> ranking.Weights:
        """What the reader's feedback and the track record taught the ranking (ranking.learn), learned again
        only when a verdict or an outcome changed (store.focus.feedback_version, store.track.outcome_version) or after
        SETTINGS_TTL_SECONDS (an account renamed): most pages read it, few requests change it."""
        now = self.clock.now()
        min_picks = self.settings().outcome_min_picks
        # the track record's outcomes change once a day (its step), the verdicts whenever the reader votes
        version = (store.focus.feedback_version(conn, now), store.track.outcome_version(conn), min_picks)
        with self._lock:
            cached = self._weights
        if cached is not None and cached[0] == version and self.clock.monotonic() - cached[1] < SETTINGS_TTL_SECONDS:
            return cached[2]
        weights = ranking.learned(conn, now, min_picks)
        with self._lock:
            self._weights = (version, self.clock.monotonic(), weights)
        return weights

    def kept(self, name: str, make: Callable[[], str]) -> str:
        """A value that never changes once made (a key the radar keeps in its database): made on first use,
        then kept for the app's life."""
        with self._lock:
            found = self._kept.get(name)
        if found is None:
            found = make()
            with self._lock:
                found = self._kept.setdefault(name, found)
        return found

    @contextmanager
    def connect_write(self) -> Iterator[psycopg.Connection]:
        """A connection that may write: the reader's own data only (their profile, their feedback); where the
        pages have a login of their own (roles.py), that is all its privileges allow."""
        self._refresh()
        assert self._resolved_url is not None
        with db.connect(self._resolved_url, pool_size=PAGES_POOL_SIZE) as conn:
            conn.execute("SET LOCAL statement_timeout = '5s'")
            yield conn


def get_resources(request: Request) -> AppResources:
    return request.app.state.radar


def zone() -> ZoneInfo:
    """Slots, report days and pages all live in Asia/Shanghai: the one business time zone, not a setting."""
    return SHANGHAI


def today(resources: AppResources) -> date:
    return resources.clock.now().astimezone(zone()).date()
