"""The one way into the radar: every entry point (the tasks through ``Runtime.load``, ``cli``, ``cli check``,
``cli evaluate``, the pages' app) gets its settings, its database and its clock here, so that they all read the
same settings the same way and reach the same database: the one ``db_conn_id`` names (``RADAR_DATABASE_URL``
first), its password registered with the log masker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from include.radar.core import db, redact
from include.radar.core.clock import SYSTEM, Clock
from include.radar.core.settings import Lookup, Settings, load_settings


@dataclass(frozen=True)
class Loaded:
    """What an entry point starts from."""

    settings: Settings
    database_url: str
    clock: Clock

    def connect(self, **bounds: Any) -> Any:
        """A connection to the database, bounded by the settings' timeouts unless ``bounds`` say otherwise."""
        bounds = {"statement_timeout_s": self.settings.db_statement_timeout_seconds,
                  "lock_timeout_s": self.settings.db_lock_timeout_seconds, **bounds}
        return db.connect(self.database_url, **bounds)


def load(lookup: Lookup | None = None, *, settings: Settings | None = None, clock: Clock | None = None,
         use_airflow: bool = True, pages: bool = False) -> Loaded:
    """The settings (read through ``lookup``, default the tasks' order; or ``settings`` already read), the
    database of their ``db_conn_id`` (with ``pages``, the pages' own login of it where one is set), and the
    clock (the system's unless one is given)."""
    settings = settings if settings is not None else load_settings(lookup, use_airflow=use_airflow)
    url = (db.pages_database_url if pages else db.database_url)(settings.db_conn_id)
    redact.register(db.password_of(url))
    return Loaded(settings, url, clock or SYSTEM)
