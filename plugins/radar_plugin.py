"""Airflow plugin: the Opportunity Radar report pages, mounted on the api-server at ``/radar``.

Airflow 3 serves plugin UIs as FastAPI sub-apps (``fastapi_apps``) listed through ``external_views``, and gives
them no authentication: the app does its own (``include/radar/web/app.py``). Airflow loads plugins in every
component, so the app is registered lazily (``include/radar/web/mount.py``, standard library only) and built on
its first request in the api-server. Airflow puts ``plugins/`` on ``sys.path`` but not the bundle root, so the
root is added when ``include`` is not importable.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import include.radar  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow.plugins_manager import AirflowPlugin

from include.radar.web.mount import URL_PREFIX, AddTrailingSlash, LazyApp


class OpportunityRadarPlugin(AirflowPlugin):
    """Registers the report app and its navigation entry."""

    name = "opportunity_radar"
    fastapi_apps = [{"app": LazyApp("include.radar.web.app:app"), "url_prefix": URL_PREFIX,
                     "name": "Opportunity Radar"}]
    # /radar (no slash) would fall through to Airflow's own catch-all page: redirect it to /radar/
    fastapi_root_middlewares = [{"middleware": AddTrailingSlash, "args": [], "kwargs": {},
                                 "name": "Opportunity Radar: /radar → /radar/"}]
    external_views = [
        {
            "name": "机会雷达",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "radar",
            "icon": f"{URL_PREFIX}/static/icon.svg",
            "nav_top_level": True,
        }
    ]
