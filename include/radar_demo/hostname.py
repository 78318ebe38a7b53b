"""``[core] hostname_callable`` for several Airflow workers on one machine (``make celery``): each worker's
task instances record ``RADAR_WORKER_NAME`` as their hostname, so the grid shows which worker ran what."""

from __future__ import annotations

import os
import socket


def worker_hostname() -> str:
    return os.environ.get("RADAR_WORKER_NAME") or socket.getfqdn()
