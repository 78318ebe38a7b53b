"""The radar's Airflow plugin (include/radar/seam/plugin.py), for a plugins folder: the report pages at
``/radar`` and **机会雷达** in the menu. Airflow puts ``plugins/`` on ``sys.path`` but not the bundle root, so the
root is added when ``include`` is not importable. A radar installed as a package registers the same plugin
through its entry point instead: then leave this folder out of ``[core] plugins_folder``.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import include.radar  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from include.radar.seam.plugin import OpportunityRadarPlugin

__all__ = ["OpportunityRadarPlugin"]
