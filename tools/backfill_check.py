"""The two-day backfill of docs/operations.md, run for real under `airflow standalone` (LocalExecutor, metadata on
PostgreSQL: the `make ui` set-up) against stand-ins, and checked.

WeRSS holds the articles of tests/backfill_days.py (one before the range, the others spread over the ten slots
of 5-6 January 2026, one exactly at a slot's time); DeepSeek answers every article with a score of 80 (so a
live slot would push) and the digest with a quiet day. The script unpauses the DAG (a backfill runs only on an
unpaused DAG; the live run that unpausing starts is left out of the checks), runs the documented
`airflow backfill create` command as written, and checks (the exit status is 0 only when all hold):

- 10 backfill runs, in date and slot order, one at a time, all successful;
- every article analysed by the slot that owns it (the first planned slot at or after its publication);
  the one before the range by no backfilled slot (the live run may take it);
- 2 daily reports, each counting its five slots;
- nothing pushed for either day.

    make backfill-check        # about three minutes

It waits on events (the DAG stored, the runs' and tasks' states), not on a clock: as long as a task changes
state or the log shows new lines, a loaded machine is waited for (tools/local_airflow.py's ``QUIET``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from include.radar import DAG_ID
from include.radar.core import db, loader
from include.radar_demo.fakes import FakeDeepSeek, FakeWeRSS, PushSink, serve
from include.radar_demo.waiting import run
from tests.backfill_days import DAYS, PUBLISHED, SLOTS, respond
from tests.slotrun import article
from tools.local_airflow import airflow, metadata, port_from, standin_env, start, stop, wait_parsed, wait_runs

REPO = Path(__file__).resolve().parents[1]

RADAR_DB = "radar_backfill_check"
OUT = REPO / ".local" / "backfill-check"
PORT = port_from("RADAR_BACKFILL_PORT")


def documented_command() -> list[str]:
    doc = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    command = re.search(r"```\n\s*(airflow backfill create [^`]+?)\n\s*```", doc).group(1).replace("\\\n", " ")
    return shlex.split(command)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    werss = FakeWeRSS(accounts=[{"id": "MP_WXS_1", "mp_name": "研究所"}],
                      articles=[article(n, at, title=f"文章{n}") for n, (at, _) in enumerate(PUBLISHED, start=1)])
    deepseek = FakeDeepSeek(responder=respond, api_key="sk-backfill")
    pushes: list[dict[str, Any]] = []
    werss_at, deepseek_at = serve(werss.handle), serve(deepseek.handle)
    sink_at = serve(PushSink(on_message=pushes.append).handle)
    server_url = loader.load(use_airflow=False).database_url
    radar_url = db.fresh_database(server_url, RADAR_DB)
    env = {
        **os.environ,
        **standin_env(PORT, werss_at, deepseek_at, sink_at, "sk-backfill"),
        "RADAR_DATABASE_URL": radar_url,
        "AIRFLOW_VAR_RADAR_LINK_SECRET": "backfill-check-link-secret-0123456789",
    }
    run(["airflow", "dags", "delete", "-y", DAG_ID], env=env)  # earlier runs
    command = documented_command()
    print(f"[backfill] airflow standalone on {PORT}; the documented command: {' '.join(command)}; logs in {OUT}",
          flush=True)
    log = OUT / "standalone.log"
    procs = [start(log, ["airflow", "standalone"], env)]
    try:
        with metadata() as meta:
            wait_parsed(meta, DAG_ID, procs, log)
            airflow("dags", "unpause", DAG_ID, env=env)
            created = run(command, env=env)
            if created.returncode != 0:
                raise RuntimeError(f"the backfill was refused:\n{created.stdout[-2000:]}{created.stderr[-2000:]}")

            def done() -> list[dict[str, Any]] | None:
                runs = meta.execute("SELECT run_id, logical_date, state, start_date, end_date FROM dag_run "
                                    "WHERE dag_id = %s AND run_type = 'backfill' ORDER BY logical_date",
                                    (DAG_ID,)).fetchall()
                return runs if len(runs) >= 10 and all(r["state"] in ("success", "failed") for r in runs) else None

            runs = wait_runs(meta, DAG_ID, done, "the backfill's ten runs to end", procs, log)
    finally:
        stop(procs)
    with psycopg.connect(radar_url, row_factory=dict_row) as conn:
        analysed_in = {r["title"]: (r["run_date"], r["slot"]) if r["slot"] else None for r in conn.execute(
            "SELECT c.title, s.run_date, s.slot FROM content_item c LEFT JOIN analysis_result a "
            "ON a.content_item_id = c.id LEFT JOIN slot_run s ON s.id = a.slot_run_id").fetchall()}
        reports = {r["report_date"]: r for r in conn.execute("SELECT * FROM daily_report").fetchall()}
    for r in runs:
        print(f"         {r['run_id']:<44} {r['state']:<8} {r['start_date']:%H:%M:%S} → {r['end_date']:%H:%M:%S}")
    by_start = sorted(runs, key=lambda r: r["start_date"])
    one_at_a_time = all(a["end_date"] <= b["start_date"] for a, b in zip(by_start, by_start[1:], strict=False))
    expected = {f"文章{n}": owner for n, (_, owner) in enumerate(PUBLISHED, start=1)}
    # the live run that unpausing started is a scheduled run: it takes whatever is pending, so an article a
    # backfill run stored a moment before may be analysed by it (and the article before the range too). That
    # is no backfill taking another slot's article; those are listed, and left out of the comparison
    live = {t for t, o in analysed_in.items() if o and o[0] not in DAYS}
    if live:
        print(f"[backfill] analysed by the live run (a scheduled run takes any pending article): {sorted(live)}")
    own = {t: o for t, o in analysed_in.items()
           if t not in live and (expected.get(t) is not None or (o and o[0] in DAYS))}
    expected = {t: o for t, o in expected.items() if t not in live}
    ours = [m for m in pushes if any(str(day) in json.dumps(m, ensure_ascii=False) for day in DAYS)]
    print(f"[backfill] {len(runs)} runs; articles analysed in their own slot: "
          f"{sum(analysed_in.get(t) == o for t, o in expected.items() if o)} of {sum(map(bool, expected.values()))}"
          f"; reports: "
          + ", ".join(f"{d} ({len(r['slots_done'] or [])} slots)" for d, r in sorted(reports.items()))
          + f"; pushes for those days: {len(ours)} (all pushes: {len(pushes)})")
    checks = {
        "10 runs, all successful": len(runs) == 10 and all(r["state"] == "success" for r in runs),
        "in date and slot order, one at a time": [r["run_id"] for r in by_start] == [r["run_id"] for r in runs]
        and one_at_a_time,
        "every article analysed by its own slot": own == {t: o for t, o in expected.items() if o},
        "2 reports, each with its five slots": set(DAYS) <= set(reports) and all(
            sorted(reports[day]["slots_done"]) == list(SLOTS) for day in DAYS),
        "nothing pushed for the backfilled days": ours == [],
    }
    for what, ok in checks.items():
        print(f"[backfill] {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
