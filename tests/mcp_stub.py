"""The MCP server as ``cli mcp`` serves it over stdio (its tokens, its transport, its tools), on a test's clock:
the pages' figures depend on "now" (a slot is late or still ahead), and the pages' tests stand on a fixed one.

``python -m tests.mcp_stub NOW`` (ISO 8601): the database is RADAR_DATABASE_URL, the settings tests/pages.py's."""

from __future__ import annotations

import os
import sys
from datetime import datetime

from include.radar.core import settings
from include.radar.core.clock import FixedClock
from include.radar.web import mcp_server
from include.radar.web.resources import AppResources
from tests.pages import make_settings


def main(now: str) -> None:
    tokens = mcp_server.Tokens.from_environment()
    access = mcp_server.stdio_access(tokens, settings.deployment("RADAR_MCP_TOKEN"))
    radar = AppResources(make_settings, os.environ["RADAR_DATABASE_URL"], FixedClock(datetime.fromisoformat(now)))
    mcp_server.serve_stdio(radar, access)


if __name__ == "__main__":
    main(sys.argv[1])
