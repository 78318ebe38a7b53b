"""``make check``: ``cli check`` on this machine. With real connections in the environment it checks those;
without (the offline demo), it checks the demo set-up against the demo stand-ins, started as ``make ui`` starts
them (labelled as demo), so that a new user sees what a working deployment's transcript looks like."""

from __future__ import annotations

import os
import sys

from include.radar import cli
from include.radar_demo import run as demo
from include.radar_demo import ui

REAL = ("AIRFLOW_CONN_WERSS_DEFAULT", "AIRFLOW_CONN_DEEPSEEK_DEFAULT", "AIRFLOW_CONN_RADAR_PUSH")


def main(argv: list[str]) -> int:
    if not any(name in os.environ for name in REAL):
        demo.OUT.mkdir(parents=True, exist_ok=True)
        standins = ui.start_standins()
        os.environ.update({
            "AIRFLOW_VAR_RADAR_DEMO_MODE": "true",
            "AIRFLOW_VAR_RADAR_LINK_SECRET": demo.link_secret(),
            "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": demo.UI_BASE,
            "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
            "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": str(demo.MARKET),
        })
        saved = demo.OUT / "database_url"
        if saved.exists() and not os.environ.get("RADAR_DATABASE_URL_FROM_USER"):
            os.environ["RADAR_DATABASE_URL"] = saved.read_text().strip()
        print("[demo] no real connection configured: checking the demo set-up against the local stand-ins")
        for line in standins:
            print(f"[demo] {line}")
    return cli.main(["check", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
