"""The Airflow plugin: the report pages mounted on the api-server at ``/radar``, and **机会雷达** in the menu.

Airflow 3 serves plugin UIs as FastAPI sub-apps (``fastapi_apps``) listed through ``external_views``, and gives
them no authentication: the app does its own (``include/radar/web/app.py``). Airflow loads plugins in every
component, so the app is registered lazily (``include/radar/web/mount.py``, standard library only) and built on
its first request in the api-server. Found through ``plugins/radar_plugin.py`` in a plugins folder, or through
the ``airflow.plugins`` entry point when the radar is installed as a package (pyproject.toml): one or the other.
"""

from __future__ import annotations

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
