"""The day of `make compose-day` (tools/compose_day.py) against a running stack: each step's checks said
✓ / ✗ in the transcript, with its timings and the stack's memory."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from include.radar import DAG_ID
from include.radar.core.slots import SHANGHAI
from include.radar_demo.waiting import GaveUp, shapes, wait_for
from tools.compose_engine import HOST_CA, OUT, Transcript, image_kind, pip_cert, sh

# seconds in which a wait saw nothing of the stack move (a container's state or health, a task's state, a new
# kind of log line) before it gives up: a loaded machine is slow, never stopped by a deadline
QUIET = 600

AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                    "airflow-worker")


@dataclass
class Stack:
    """One compose project in its folder: commands, its databases, its stand-ins' counters, its memory."""

    folder: Path
    env: dict[str, str]
    project: str
    t: Transcript

    def compose(self, *args: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess:
        return sh(["docker", "compose", "-p", self.project, *args], cwd=self.folder, env=self.env,
                  check=check, timeout=timeout)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """A command in airflow-cli, as the guide runs them (`docker compose run --rm airflow-cli ...`)."""
        return self.compose("run", "--rm", "-T", "airflow-cli", *args, check=check, timeout=600)

    def sql(self, database: str, query: str) -> str:
        user = self.env_file().get("POSTGRES_USER", "airflow")
        return self.compose("exec", "-T", "postgres", "psql", "-U", user, "-d", database, "-tAXc", query).stdout.strip()

    def env_file(self) -> dict[str, str]:
        from tools.compose_engine import read_env

        return read_env(self.folder / ".env")

    def standin(self, service: str) -> dict[str, Any]:
        port = 8001 if service == "werss" else 8000
        code = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/_standin/stats').read().decode())"
        return json.loads(self.compose("exec", "-T", service, "python", "-c", code).stdout)

    def states(self) -> dict[str, dict[str, Any]]:
        out = self.compose("ps", "-a", "--format", "json").stdout
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        if len(rows) == 1 and isinstance(rows[0], list):
            rows = rows[0]
        return {r["Service"]: r for r in rows}

    def wait_healthy(self, services: list[str], since: float | None = None) -> dict[str, float] | None:
        """The seconds from ``since`` (else now) until each of ``services`` was seen healthy (running, for one
        without a health check); None when none of the stack's containers changed state or health for
        ``QUIET`` seconds first (a loaded machine starts them slowly, not never)."""
        started, ready, seen = since or time.monotonic(), {}, [None]

        def all_ready() -> bool:
            states = self.states()
            seen[0] = sorted((s, r.get("State"), r.get("Health")) for s, r in states.items())
            ready.update({s: time.monotonic() - started for s in services if s not in ready and _ready(states.get(s))})
            return len(ready) == len(services)

        try:
            wait_for(all_ready, f"{', '.join(services)} to be healthy", QUIET, [], lambda: seen[0], every=1)
        except GaveUp as exc:
            self.t.say(str(exc))
            return None
        return ready

    def memory_mib(self) -> dict[str, float]:
        names = self.compose("ps", "-q").stdout.split()
        if not names:
            return {}
        out = sh(["docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}", *names]).stdout
        return {line.split("\t")[0].removeprefix(self.project + "-"): _mib(line.split("\t")[1].split("/")[0])
                for line in out.splitlines() if "\t" in line}

    def save_logs(self) -> None:
        (OUT / "logs").mkdir(parents=True, exist_ok=True)
        (OUT / "logs" / "stack.log").write_text(self.compose("logs", "--no-color", check=False).stdout)


def _ready(state: dict[str, Any] | None) -> bool:
    if state is None or state.get("State") != "running":
        return False
    return state.get("Health") in ("", None, "healthy")


def _mib(text: str) -> float:
    number, unit = re.match(r"([\d.]+)\s*([KMG]i?B|B)", text.strip()).groups()
    return float(number) * {"B": 1 / 2**20, "KiB": 1 / 1024, "KB": 1 / 1024, "MiB": 1, "MB": 1, "GiB": 1024,
                            "GB": 1024}[unit]


def check_backing_services(stack: Stack, values: dict[str, str]) -> None:
    """PostgreSQL and Redis as our compose file uses them: the superuser's password asked over TCP, Redis's."""
    user, password = values.get("POSTGRES_USER", "airflow"), values["POSTGRES_PASSWORD"]
    tcp = stack.compose("exec", "-T", "-e", f"PGPASSWORD={password}", "postgres", "psql", "-h", "127.0.0.1", "-U",
                        user, "-d", "airflow", "-tAc", "select current_user", check=False)
    stack.t.check(tcp.stdout.strip() == user, f"postgres: the superuser {user} logs in over TCP with POSTGRES_PASSWORD")
    wrong = stack.compose("exec", "-T", "-e", "PGPASSWORD=wrong", "postgres", "psql", "-h", "127.0.0.1", "-U", user,
                          "-d", "airflow", "-tAc", "select 1", check=False)
    stack.t.check(wrong.returncode != 0, "postgres: a wrong password is refused")
    pong = stack.compose("exec", "-T", "redis", "bash", "-c", 'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli ping',
                         check=False).stdout.strip()
    anonymous = stack.compose("exec", "-T", "redis", "redis-cli", "ping", check=False).stdout.strip()
    stack.t.check(pong == "PONG" and "NOAUTH" in anonymous, "redis: PONG with REDIS_PASSWORD, NOAUTH without")


def build_and_up(stack: Stack) -> dict[str, float]:
    """`docker compose build` (the radar's image) and `up -d`; the seconds each took, to healthy."""
    t, started = stack.t, time.monotonic()
    args = ["build"]
    if pip_cert() and image_kind("apache/airflow:3.3.2-python3.11") == "stand-in":
        args += ["--build-arg", f"PIP_CERT={HOST_CA}"]  # this machine's TLS-inspecting proxy, never a user's
    stack.compose(*args)
    timings = {"build": time.monotonic() - started}
    t.check(True, f"docker compose build: the radar's image in {timings['build']:.0f} s")
    return {**timings, **up(stack, "up -d")}


def up(stack: Stack, what: str) -> dict[str, float]:
    """`docker compose up -d` and the wait for every health check: seconds to the api-server and to all."""
    t, started = stack.t, time.monotonic()
    stack.compose("up", "-d")  # returns once what others depend on is healthy (the api-server for the worker)
    t.say(f"{what} returned after {time.monotonic() - started:.0f} s")
    services = [s for s in stack.compose("config", "--services").stdout.split() if s != "airflow-init"]
    ready = stack.wait_healthy(services, since=started)
    init = stack.states().get("airflow-init", {})
    took = sh(["docker", "inspect", "-f", "{{.State.StartedAt}} {{.State.FinishedAt}}", init.get("Name", "-")],
              check=False).stdout.split()
    span = (datetime.fromisoformat(took[1][:26]) - datetime.fromisoformat(took[0][:26])).total_seconds() if len(took) == 2 else 0
    t.check(init.get("State") == "exited" and init.get("ExitCode") == 0, f"airflow-init exited 0 after {span:.0f} s")
    if ready is None:
        t.check(False, f"{what}: not every service healthy within 900 s")
        raise RuntimeError("the stack did not become healthy")
    t.check(True, f"{what}: the api-server seen healthy {ready['airflow-apiserver']:.0f} s after it, every service "
            f"healthy or running {max(ready.values()):.0f} s after ({len(services)}: {', '.join(services)})")
    return {"api": ready["airflow-apiserver"], "healthy": max(ready.values()), "since": started}


def guide_checks(stack: Stack) -> None:
    """What airflow-init set up, seen from airflow-cli as the guide's steps do, then `check --send-test`."""
    t = stack.t
    init_log = stack.compose("logs", "--no-color", "airflow-init").stdout
    t.check("Migrating the radar schema:" in init_log and "What the pages' login may read" in init_log,
            "airflow-init: the logins provisioned, the radar's schema migrated, the pages' login granted")
    pools = stack.cli("airflow", "pools", "list", "-o", "plain").stdout
    t.check(re.search(r"radar_llm\s+2\b", pools) is not None, "airflow-cli: the pool radar_llm has 2 slots")
    migrate = stack.cli("python", "-m", "include.radar.cli", "migrate").stdout
    t.check("up to date" in migrate, "airflow-cli: cli migrate says the radar's schema is up to date")
    stack.cli("airflow", "dags", "unpause", DAG_ID)
    t.check(True, "airflow-cli: airflow dags unpause (step 14)")
    before = stack.standin("push-standin")
    check = stack.cli("python", "-m", "include.radar.cli", "check", "--send-test", check=False)
    (OUT / "logs").mkdir(parents=True, exist_ok=True)
    (OUT / "logs" / "check.txt").write_text(check.stdout + check.stderr)
    lines = [line.strip() for line in check.stdout.splitlines() if line.strip().startswith(("✓", "!", "✗"))]
    # what the offline run cannot change: the track record replays recorded prices (行情数据), and the links are
    # on 127.0.0.1 (no TLS proxy, the guide's step 12)
    warned = [line for line in lines if line.startswith(("!", "✗"))
              and not line.startswith(("! 行情数据 · 来源", "! 链接 · report_base_url"))]
    t.check(check.returncode == 0 and not warned and len(lines) > 15,
            f"airflow-cli: check --send-test (step 15): {len(lines)} lines, "
            f"{sum(line.startswith('✓') for line in lines)} ✓" + ("; " + " | ".join(warned) if warned else ""))
    after = stack.standin("push-standin")
    t.check(len(after["reader"]) == len(before["reader"]) + 1 and len(after["ops"]) == len(before["ops"]) + 1,
            "the test message reached the reader's and the operator's stand-in channel, once each")


def trigger(stack: Stack, day: date, slot: str | None, run_id: str) -> None:
    """A run dated at ``slot`` of ``day``; without a slot, a run of now (the latest slot before it)."""
    dated = [] if slot is None else [
        "--logical-date", datetime.combine(day, datetime.strptime(slot, "%H:%M").time(), SHANGHAI).isoformat()]
    stack.compose("exec", "-T", "airflow-scheduler", "airflow", "dags", "trigger", DAG_ID, "--run-id", run_id, *dated)


def states(stack: Stack) -> str:
    """How many of the DAG's runs and task instances are in each state: it changes whenever one does."""
    return stack.sql("airflow", f"SELECT 'runs', state, count(*) FROM dag_run WHERE dag_id = '{DAG_ID}' GROUP BY state "
                                f"UNION ALL SELECT 'tasks', coalesce(state, 'none'), count(*) FROM task_instance "
                                f"WHERE dag_id = '{DAG_ID}' GROUP BY state ORDER BY 1, 2").replace("\n", "; ")


def wait_run(stack: Stack, run_id: str, during: Any = None) -> dict[str, Any]:
    """The run's end: its state and its seconds from start to end; ``during()`` is called while it runs. It
    waits while the DAG's runs and tasks change state; ``QUIET`` seconds without a change: "stalled"."""
    def ended() -> dict[str, Any] | None:
        row = stack.sql("airflow", f"SELECT state, extract(epoch from end_date - start_date) FROM dag_run "
                                   f"WHERE run_id = '{run_id}'")
        state, _, took = row.partition("|")
        if state in ("success", "failed"):
            return {"state": state, "seconds": float(took or 0)}
        if during is not None:
            during()
        return None

    try:
        return wait_for(ended, f"run {run_id}", QUIET, [], lambda: states(stack), every=1)
    except GaveUp as exc:
        stack.t.say(str(exc))
        return {"state": "stalled", "seconds": 0.0}


def counts(stack: Stack, database: str = "radar") -> dict[str, int]:
    row = stack.sql(database, "SELECT (SELECT count(*) FROM content_item), (SELECT count(*) FROM analysis_result), "
                              "(SELECT count(DISTINCT content_item_id) FROM analysis_result), "
                              "(SELECT count(*) FROM notification_log WHERE sent_at IS NOT NULL)")
    articles, analyses, analysed, sent = (int(v) for v in row.split("|"))
    return {"articles": articles, "analyses": analyses, "analysed": analysed, "sent": sent}


class MemoryPeak:
    """The stack's memory, sampled while a slot runs: the largest total seen, and each container's then."""

    def __init__(self, stack: Stack) -> None:
        self.stack, self.total, self.at, self.last = stack, 0.0, {}, 0.0

    def __call__(self) -> None:
        if time.monotonic() - self.last < 3:
            return
        self.last = time.monotonic()
        sample = self.stack.memory_mib()
        if sum(sample.values()) > self.total:
            self.total, self.at = sum(sample.values()), sample


def say_memory(t: Transcript, what: str, sample: dict[str, float]) -> None:
    t.say(f"memory {what}: {sum(sample.values()):.0f} MiB in all; " + ", ".join(
        f"{name} {mib:.0f}" for name, mib in sorted(sample.items(), key=lambda kv: -kv[1])))


def first_slot(stack: Stack, day: date, slot: str) -> dict[str, Any]:
    """The day's first slot: the demo's earlier articles, an opportunity among them, one push."""
    t, before = stack.t, stack.standin("push-standin")
    peak = MemoryPeak(stack)
    trigger(stack, day, slot, "compose-day-1")
    run = wait_run(stack, "compose-day-1", peak)
    now, pushes, llm = counts(stack), stack.standin("push-standin"), stack.standin("deepseek-standin")
    new = pushes["reader"][len(before["reader"]):]
    t.check(run["state"] == "success", f"slot {slot} through the Celery worker: {run['state']} in {run['seconds']:.0f} s")
    t.check(now["analyses"] == now["analysed"] == now["articles"] == llm["articles"] == llm["calls"] > 0,
            f"slot {slot}: {now['articles']} articles stored, {now['analyses']} analyses, {llm['calls']} LLM calls")
    t.check(len(new) == 1, f"slot {slot}: one opportunity push at the stand-in sink: {new}")
    say_memory(t, f"at the peak of slot {slot}", peak.at)
    return {"run": run, "peak": peak}


def killed_slot(stack: Stack, day: date, slot: str) -> dict[str, Any]:
    """The second slot: its articles' analysis under way when the worker container is killed and started."""
    t, before, calls = stack.t, counts(stack), stack.standin("deepseek-standin")["calls"]
    pushes_before = len(stack.standin("push-standin")["reader"])
    trigger(stack, day, slot, "compose-day-2")
    wait_for(lambda: stack.standin("deepseek-standin")["calls"] >= calls + 4, f"slot {slot}'s analysis to start",
             QUIET, [], lambda: states(stack))
    stack.compose("kill", "airflow-worker")
    killed = time.monotonic()
    t.say(f"slot {slot}: the worker container killed (docker compose kill) with {stack.standin('deepseek-standin')['calls'] - calls} "
          f"of its LLM calls made, {counts(stack)['analyses'] - before['analyses']} analyses stored")
    stack.compose("start", "airflow-worker")
    t.say(f"slot {slot}: the worker container started again {time.monotonic() - killed:.0f} s later")
    run = wait_run(stack, "compose-day-2")
    now, llm = counts(stack), stack.standin("deepseek-standin")
    pushes = stack.standin("push-standin")["reader"][pushes_before:]
    t.check(run["state"] == "success", f"slot {slot} after the kill: {run['state']}, {time.monotonic() - killed:.0f} s "
            "from the kill to the run's end")
    t.check(now["analyses"] == now["analysed"] == now["articles"] > before["articles"],
            f"slot {slot}: every article analysed once ({now['articles'] - before['articles']} new, "
            f"{now['analyses']} analyses of {now['articles']} articles)")
    t.check(len(pushes) == 1, f"slot {slot}: one push: {pushes}")
    t.say(f"slot {slot}: {llm['calls'] - calls} LLM calls for {now['articles'] - before['articles']} articles "
          f"(an answer in flight when the worker died is asked again: {llm['most_calls_of_one']} at most for one)")
    return {"run": run}


def daily_slot(stack: Stack, day: date, slot: str) -> dict[str, Any]:
    t, before = stack.t, stack.standin("push-standin")
    calls = stack.standin("deepseek-standin")["articles"]
    trigger(stack, day, slot, "compose-day-3")
    run = wait_run(stack, "compose-day-3")
    after = stack.standin("push-standin")
    new = after["reader"][len(before["reader"]):]
    t.check(run["state"] == "success", f"slot {slot} (the daily report): {run['state']} in {run['seconds']:.0f} s")
    t.check(len(new) == 1 and new[0].startswith("【日报】"), f"slot {slot}: the daily report's push: {new}")
    t.check(stack.standin("deepseek-standin")["articles"] == calls, f"slot {slot}: no article analysed again")
    slot_pushes = [m for m in after["reader"] if "测试" not in m]  # not check's test message
    t.check(len(slot_pushes) == len(set(slot_pushes)) == 3,
            f"the day's pushes at the reader's sink, nothing twice: {len(slot_pushes)}")
    return {"run": run, "message": after["last_reader_message"]}


def pages(stack: Stack, message: str, values: dict[str, str]) -> None:
    """The pushed link, opened from the host through the published port: 200, and 401 without its signature."""
    t = stack.t
    links = re.findall(r"https?://\S+", message)
    t.check(bool(links), f"the daily push carries a link: {links[-1] if links else message[-200:]}")
    if not links:
        return
    link = links[-1]
    t.check(link.startswith(values["AIRFLOW_VAR_RADAR_REPORT_BASE_URL"]), "the link is on the report base URL")
    t.check(_status(link) == 200, "the signed link opens the report from outside the stack: 200")
    bare = link.split("?", 1)[0]
    t.check(_status(bare) == 401, f"the same page without the signature: {_status(bare)} (401 expected)")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def down_and_up(stack: Stack, day: date, slots: list[str]) -> None:
    """`down`, `up` again: the volumes keep the data; the next run of the day pays for nothing again."""
    t, before = stack.t, counts(stack)
    stack.compose("down")
    t.say("docker compose down")
    again = up(stack, "up -d again")
    now = counts(stack)
    t.check(now == before, f"after down and up the radar's data is all there: {now}")
    trigger(stack, day, None, "compose-day-4")  # a run of now: the latest slot, the daily one
    run = wait_run(stack, "compose-day-4")
    llm, werss, pushes = (stack.standin(s) for s in ("deepseek-standin", "werss", "push-standin"))
    t.check(run["state"] == "success", f"a run triggered now (the latest slot, {slots[-1]}, again): {run['state']}")
    t.check(llm["calls"] == 0 and werss["detail_calls"] == 0 and not pushes["reader"],
            f"it paid for nothing twice: {llm['calls']} LLM calls, {werss['detail_calls']} bodies fetched, "
            f"{len(pushes['reader'])} pushes")
    del again


def backup_and_restore(stack: Stack) -> None:
    """The guide's backup inside the stack (pg_dump in the postgres container), restored into a new database."""
    t, user = stack.t, stack.env_file().get("POSTGRES_USER", "airflow")
    (stack.folder / "backups").mkdir(exist_ok=True)
    dump = "backups/radar-compose-day.dump"
    sh(f"docker compose -p {stack.project} exec -T postgres pg_dump -U {user} -Fc radar > {dump}", cwd=stack.folder,
       env=stack.env)
    stack.compose("exec", "-T", "postgres", "createdb", "-U", user, "radar_restored")
    sh(f"docker compose -p {stack.project} exec -T postgres pg_restore -U {user} -d radar_restored --no-owner "
       f"--no-privileges --exit-on-error --single-transaction < {dump}", cwd=stack.folder, env=stack.env)
    size = (stack.folder / dump).stat().st_size
    t.check(counts(stack, "radar_restored") == counts(stack), f"backup ({size // 1024} KiB) restored into radar_restored:"
            f" the same articles, analyses and sent messages ({counts(stack, 'radar_restored')})")


def run_day(stack: Stack, values: dict[str, str], day: date, slots: list[str], started: float) -> None:
    t = stack.t
    timings = build_and_up(stack)
    t.say(f"from the make target's start to a healthy stack: {time.monotonic() - started:.0f} s")
    say_memory(t, "at rest", stack.memory_mib())
    wait_for(lambda: stack.sql("airflow", f"SELECT count(*) FROM dag WHERE dag_id = '{DAG_ID}'") == "1",
             "the dag-processor to store the DAG (new kinds of line in its log)", QUIET, [],
             lambda: len(shapes(stack.compose("logs", "--no-log-prefix", "airflow-dag-processor").stdout)), every=2)
    guide_checks(stack)
    runs = stack.sql("airflow", f"SELECT count(*) FROM dag_run WHERE dag_id = '{DAG_ID}'")
    t.check(runs == "0", f"unpausing started no run of its own ({runs}): the scheduler makes none in this run")
    first_slot(stack, day, slots[0])
    killed_slot(stack, day, slots[1])
    daily = daily_slot(stack, day, slots[2])
    pages(stack, daily["message"], values)
    t.say(f"the operator's channel received: {stack.standin('push-standin')['ops']}")
    say_memory(t, "at rest after the day", stack.memory_mib())
    down_and_up(stack, day, slots)
    backup_and_restore(stack)
    del timings
