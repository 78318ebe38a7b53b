"""How WeRSS v1.4.9 loads and runs its message tasks, for the WeRSS stand-in (fakes.py). Pure: no I/O.

「应用」 (``job/fresh``) loads the active tasks, each with the accounts subscribed at that moment (``mps_id``
``"[]"``: all of them), and fails (HTTP 500) when a task's ``mps_id`` is not what ``json.loads`` and
``item["id"]`` accept; a scheduled run then starts on each of a loaded task's accounts, which sets that
account's ``sync_time``; ``…/run`` parses first and answers code 402 with the parser's message.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

Loaded = dict[str, frozenset[str]]


def _ids(task: dict[str, Any]) -> list[str]:
    """The task's accounts as WeRSS reads ``mps_id``; raises as WeRSS's own reading does."""
    return [str(item["id"]) for item in json.loads(task.get("mps_id"))]


def load(tasks: list[dict[str, Any]], accounts: list[dict[str, Any]]) -> Loaded | None:
    """What 「应用」 loads: task id -> its accounts as subscribed now; None when a task cannot be read."""
    every = frozenset(str(a.get("id")) for a in accounts)
    loaded: Loaded = {}
    for task in tasks:
        if task.get("status") != 1 or not task.get("cron_exp"):
            continue
        try:
            ids = frozenset(_ids(task))
        except (TypeError, ValueError, KeyError):
            return None
        loaded[str(task["id"])] = (ids & every) or every
    return loaded


def run(tasks: list[dict[str, Any]], accounts: list[dict[str, Any]], task_id: str) -> tuple[dict[str, Any], set[str]]:
    """``GET message_tasks/{id}/run``: the answer's body, and the accounts the run starts on."""
    task = next((t for t in tasks if str(t.get("id")) == task_id and t.get("status") == 1), None)
    if task is None:
        return {"code": 402, "message": "404: Message task not found or has been deactivated", "data": None}, set()
    try:
        ids = _ids(task)
    except json.JSONDecodeError as exc:
        return {"code": 402, "message": str(exc), "data": None}, set()
    except (TypeError, KeyError) as exc:
        return {"code": 402, "message": repr(exc), "data": None}, set()
    every = {str(a.get("id")) for a in accounts}
    data = {"count": len(ids), "list": [ids], "message": f"执行成功，共执行更新{len(ids)}个订阅号"}
    return {"code": 0, "message": data["message"], "data": data}, (set(ids) & every) or every


def last_scheduled_run(tasks: list[dict[str, Any]], loaded: Loaded, mp_id: str, now: int, tz: ZoneInfo) -> int:
    """When a loaded task covering ``mp_id`` last fired before ``now`` (0: none covers it)."""
    moment = datetime.fromtimestamp(now, tz)
    crons = [t["cron_exp"] for t in tasks if mp_id in loaded.get(str(t.get("id")), ())]
    return max((int(croniter(c, moment).get_prev(datetime).timestamp()) for c in crons), default=0)


def record(row: dict[str, Any], synced: int) -> dict[str, Any]:
    """``GET mps/{id}``: the whole account record, ``sync_time`` (0: never collected) included."""
    return {"id": row.get("id"), "mp_name": row.get("mp_name", ""), "mp_cover": "", "mp_intro": "",
            "status": row.get("status", 1), "sync_time": synced, "update_time": synced,
            "created_at": row.get("created_at", "2026-01-01T08:00:00"), "updated_at": row.get("created_at"),
            "faker_id": "MzA5MDAwMDAwMQ=="}
