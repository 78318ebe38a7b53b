"""The guide as a test: every shell block of docs/deployment.md and docs/check.md that a reader types runs here,
verbatim and in order, on this machine's one-host shape (二、一台主机，不用 Docker, then 七).

The shape: two more OS users, ``radar`` (the tasks) and ``radar_pages`` (the api-server); the system PostgreSQL
on its socket (/var/run/postgresql, the ``postgres`` OS user) and on 127.0.0.1:5432; /opt/radar a clone of this
checkout's HEAD with its venv; the env files as the guide writes them; WeRSS, DeepSeek and the push channel as local
stand-ins (the sandbox reaches only package registries). A block the test cannot run here is marked in the Markdown
with its reason (``<!-- guide-test: skip — … -->``); the test prints what it ran and what it skipped.

The only substitution in the blocks: the placeholder ``<本仓库的地址>`` (this checkout). What the guide asks the
reader to do by hand, the test does and says so: it fills the env files' ``<…>`` (the database passwords: fresh
random ones), types the admin's password at Airflow's prompt, points the DeepSeek and push connections at the
stand-ins (WeRSS's stand-in listens where tasks.env.example says, 127.0.0.1:8001) and adds the recorded market
data; it installs the lock into /opt/radar/venv with uv first, so
that the guide's own ``pip install … -c requirements.lock`` finds everything satisfied.

It runs as root where the system PostgreSQL's socket is (CI: .ci/run installs sudo), otherwise it skips and says
why. After the walk it starts the api-server as its unit would, as ``radar_pages``: its pages answer, the tasks'
secrets stay out of its reach. Safe to run twice: it removes what a previous run made (the two users, /opt/radar,
/var/lib/radar, /etc/opportunity-radar, the units it copied, the roles and databases radar, radar_pages and
airflow) first, and refuses to touch an /opt/radar it did not make.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from include.radar.core import signing
from include.radar.core.clock import SYSTEM
from include.radar.operations import env_file
from include.radar_demo.waiting import run, wait_for
from tests.guide import shell_blocks, skip_marks

REPO = Path(__file__).resolve().parents[1]
GUIDE = [REPO / "docs" / "deployment.md", REPO / "docs" / "check.md"]
SOCKET = Path("/var/run/postgresql/.s.PGSQL.5432")
OPT, HOME, ETC = Path("/opt/radar"), Path("/var/lib/radar"), Path("/etc/opportunity-radar")
MARK = OPT / ".made-by-test-guide"
UNIT_COPIES = Path("/etc/systemd/system")
WERSS_PORT = 8001  # tasks.env.example's WeRSS address
API = "http://127.0.0.1:8080"  # airflow.cfg.radar's [api] host and port
AK, SK, DEEPSEEK_KEY = "WKguidetest", secrets.token_urlsafe(16), "sk-guidetest"
ADMIN_PASSWORD = secrets.token_urlsafe(16)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ONE_HOST_CHECK = ("sudo -u radar /opt/radar/venv/bin/python -m include.radar.cli --env-file /etc/opportunity-radar/airflow.env"
                  " --env-file /etc/opportunity-radar/tasks.env --env-file /etc/opportunity-radar/pages.env check")


def _all_blocks():
    return [b for path in GUIDE for b in shell_blocks(path)]


# ------------------------------------------------------------------------------------- the marks, always


def test_every_shell_block_is_run_or_says_why_not() -> None:
    blocks = _all_blocks()
    skipped = [b for b in blocks if b.skip]
    for b in skipped:
        assert len(b.skip) > 8, f"{b.where()}: a skip mark needs its reason"
    marks = sum(len(skip_marks(path)) for path in GUIDE)
    assert marks == len(skipped), "a guide-test mark that precedes no ```bash block"
    ran = [b for b in blocks if not b.skip]
    assert ran and all(b.path.name == "deployment.md" for b in ran)
    print(f"\nthe guide: {len(blocks)} shell blocks, {len(ran)} run by test_the_one_host_guide_runs_as_written, "
          f"{len(skipped)} marked skip:")
    for b in skipped:
        print(f"  skip {b.where()}: {b.skip}")


def test_the_one_host_check_command_is_the_same_in_the_guide_and_in_check_md() -> None:
    deployment = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    typed = [" ".join(b.text.replace("\\\n", " ").splitlines()[0].split()) for b in _all_blocks()
             if "pages.env check" in b.text]
    assert len(typed) == 2 and all(t == ONE_HOST_CHECK for t in typed), typed
    assert f"`{ONE_HOST_CHECK}`" in (REPO / "docs" / "check.md").read_text(encoding="utf-8")
    assert ". /etc/opportunity-radar/" not in deployment  # sh's reading strips the JSON's quotes


@pytest.mark.hostile
def test_the_one_host_guide_puts_no_password_on_a_command_line() -> None:
    """ps, sudo's log and the shell's history keep command lines: the blocks a reader types read the database
    passwords from the env files and the admin's from Airflow's prompt."""
    for block in (b for b in _all_blocks() if not b.skip):
        typed = block.text
        assert "--password" not in typed and not re.search(r"PASSWORD\w*=", typed), block.where()
        assert not re.search(r"://[^\s/@:'\"]+:[^\s/@'\"]+@", typed), f"{block.where()}: a URL with its password"
        assert not any(word in typed for word in ("雷达密码", "页面密码", "元数据密码", "一个长密码")), block.where()


# ------------------------------------------------------------------------------------ the guide, for real


def _why_not_here() -> str | None:
    if os.environ.get("RADAR_SKIP_GUIDE"):
        return "RADAR_SKIP_GUIDE is set"
    if os.geteuid() != 0:
        return "needs root (it makes the OS user radar and writes /opt/radar, /etc/opportunity-radar)"
    if not SOCKET.exists():
        return f"no system PostgreSQL on its socket ({SOCKET})"
    for tool in ("sudo", "python3.11", "git", "psql"):
        if shutil.which(tool, path=PATH) is None:
            return f"{tool} is not installed (.ci/run installs sudo)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no OS user postgres"
    if OPT.exists() and not MARK.exists():
        return f"{OPT} exists and was not made by this test: a real deployment is not touched"
    return None


def _sh(command: str) -> subprocess.CompletedProcess[str]:
    return run(["bash", "-c", command], env={"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8"})


def _reset() -> None:
    """What a previous run made, gone (a real /opt/radar was refused before)."""
    # the services an earlier walk started as radar (userdel refuses a user with processes)
    for user in ("radar", "radar_pages"):
        _sh(f"id {user} >/dev/null 2>&1 && {{ pkill -KILL -u {user}; sleep 1; userdel -r {user} >/dev/null 2>&1; }}; true")
    for path in (OPT, HOME, ETC):
        shutil.rmtree(path, ignore_errors=True)
    for unit in [*UNIT_COPIES.glob("radar-*.service"), UNIT_COPIES / "opportunity-radar.target"]:
        unit.unlink(missing_ok=True)
    sql = ("DROP DATABASE IF EXISTS radar WITH (FORCE); DROP DATABASE IF EXISTS airflow WITH (FORCE); "
           "DROP ROLE IF EXISTS radar; DROP ROLE IF EXISTS radar_pages; DROP ROLE IF EXISTS airflow")
    statements = " ".join(f"-c '{statement};'" for statement in sql.split("; ") if statement.strip(" ;"))
    done = _sh(f"cd / && sudo -u postgres psql -q -h /var/run/postgresql -d postgres -v ON_ERROR_STOP=1 {statements}")
    assert done.returncode == 0, done.stderr


# served from /opt/radar's own code, the commit under test, whatever the working tree holds
STANDINS = f"""
import json, threading, time
from include.radar_demo import run as demo
from include.radar_demo.fakes import PushSink, serve
werss = demo.build_werss(demo.demo_day(), [0])
werss.now = lambda: int(time.time())
werss.access_key, werss.secret_key = {AK!r}, {SK!r}
deepseek = demo.build_deepseek()
deepseek.api_key = {DEEPSEEK_KEY!r}
print(json.dumps({{"werss": serve(werss.handle, {WERSS_PORT}), "deepseek": "http://" + serve(deepseek.handle),
                  "push": "json://" + serve(PushSink().handle)}}), flush=True)
threading.Event().wait()
"""


def _standins() -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([str(OPT / "venv" / "bin" / "python"), "-c", STANDINS], cwd=OPT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={"PATH": PATH, "PYTHONPATH": str(OPT)})
    found = json.loads(proc.stdout.readline() or "{}")
    assert found.get("werss", "").endswith(f":{WERSS_PORT}"), f"port {WERSS_PORT} is taken: the guide's WeRSS address"
    return proc, found


def _fill_env_files(passwords: dict[str, str], standins: dict[str, str]) -> None:
    """What 二.3 and 二.5 ask the reader to do by hand: the `<…>` of each example filled in; DeepSeek and the push
    channel at their stand-ins; the recorded market data (no akshare here)."""
    link = secrets.token_urlsafe(32)
    fill = {**{f"<{name}>": password for name, password in passwords.items()},
            "<AK>": AK, "<SK>": SK, "<sk-…>": DEEPSEEK_KEY, "<the same as in tasks.env>": link,
            "<python3 -c 'import secrets; print(secrets.token_urlsafe(32))'>": link,
            "https://api.deepseek.com": standins["deepseek"]}
    for name in ("metadata", "tasks", "pages"):
        path = ETC / f"{name}.env"
        text = path.read_text(encoding="utf-8")
        for placeholder, value in fill.items():
            text = text.replace(placeholder, value)
        text = text.replace('"<apprise URL>"]}}\nAIRFLOW_CONN_RADAR_OPS', f'"{standins["push"]}/push"]}}}}\nAIRFLOW_CONN_RADAR_OPS')
        text = text.replace('"<apprise URL>"', f'"{standins["push"]}/ops"')
        if name == "tasks":
            market = OPT / "include" / "radar_demo" / "data" / "market"
            text += f"AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE=recorded\nAIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR={market}\n"
        assert not re.search(r"<[^>\n]+>", text), text
        path.write_text(text, encoding="utf-8")


def _install_the_lock() -> None:
    """The guide's pip lines then run verbatim and find everything there (from scratch they take ~16 min)."""
    done = run([str(REPO / ".venv" / "bin" / "uv"), "pip", "install", "-q", "--python",
                str(OPT / "venv" / "bin" / "python"), "-r", str(OPT / "requirements.lock")])
    assert done.returncode == 0, done.stderr[-3000:]


def _typed(text: str) -> str:
    return text.replace("<本仓库的地址>", str(REPO))


def _outcome(block, done: subprocess.CompletedProcess[str], seconds: float) -> str:
    out = (done.stdout + done.stderr).strip()
    shown = "\n".join("      " + line for line in out.splitlines()[-40:])
    return f"  ran {block.where()} in {seconds:.0f} s, exit {done.returncode}\n{shown}"


def _unit_lines(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.startswith("#"):
            found.setdefault(key, []).append(value)
    return found


def _as(user: str, command: str) -> subprocess.CompletedProcess[str]:
    return _sh(f"cd / && sudo -u {user} {command}")


def _start_as_its_unit(unit_file: Path, log: Path) -> subprocess.Popen[bytes]:
    """What systemd does with the unit the guide copied (there is no systemd here): its env files read as root,
    then its ExecStart as its User and Group, no other group."""
    unit = _unit_lines(unit_file)
    user = unit["User"][0]
    env = {"PATH": PATH, "LANG": "C.UTF-8", "HOME": pwd.getpwnam(user).pw_dir, "USER": user}
    for path in unit["EnvironmentFile"]:
        env.update(env_file.read(Path(path)))
    with log.open("w") as out:
        proc = subprocess.Popen(unit["ExecStart"][0].split(), user=user, group=unit["Group"][0], extra_groups=[],
                                env=env, cwd="/", stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log = log  # what wait_for watches
    return proc


def _health() -> dict | None:
    try:
        with urllib.request.urlopen(f"{API}/api/v2/monitor/health", timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return None


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as refused:
        return refused.code, ""


def _assert_the_api_server_holds_no_task_secret(tmp_path: Path, running: list) -> None:
    """The files as the api-server's user meets them after the guide, then the api-server started as its unit
    starts it: it reads its AIRFLOW_HOME and its database, and nothing of the tasks'."""
    unit_file = UNIT_COPIES / "radar-api-server.service"
    user = _unit_lines(unit_file)["User"][0]
    assert user != "radar" and "radar" not in _sh(f"id -nG {user}").stdout.split()
    for name in ("airflow", "metadata", "tasks", "pages"):
        assert _as(user, f"cat {ETC / name}.env").returncode != 0, f"{user} reads {name}.env"
    airflow_home = HOME / "airflow"
    assert _as(user, f"cat {airflow_home / 'airflow.cfg'}").returncode == 0
    assert _as(user, f"touch {airflow_home / 'written-by-the-api-server'}").returncode != 0
    unreadable = _as(user, f"find {airflow_home} ! -readable")
    assert unreadable.returncode == 0 and unreadable.stdout == "", unreadable
    task = subprocess.Popen(["cat"], stdin=subprocess.PIPE, user="radar", env={"RADAR_TASK_SECRET": "x"})
    running.append(task)
    assert _as(user, f"cat /proc/{task.pid}/environ").returncode != 0, "a task's environment"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", 8080)) != 0, f"port 8080 ({API}) is taken: the guide's api-server"
    api = _start_as_its_unit(unit_file, tmp_path / "api-server.log")
    running.append(api)
    health = wait_for(_health, f"the api-server as {user}", 300, [api])
    assert health["metadatabase"]["status"] == "healthy", health
    # the report pages on the pages' login: the overview through a link signed as a push signs it, none without
    secret = env_file.read(ETC / "pages.env")["AIRFLOW_VAR_RADAR_LINK_SECRET"]
    status, page = _status(signing.page_url(f"{API}/radar", "/", secret, SYSTEM.now(), 1))
    assert status == 200 and "机会雷达" in page, (status, page[:500], api.log.read_text()[-3000:])
    assert _status(f"{API}/radar/")[0] == 401
    print(f"  the api-server as {user}: {health['metadatabase']}, the overview through a signed link 200, 401 without;"
          " the env files, a task's environment and AIRFLOW_HOME's writes refused to it")


def _assert_check(block, out: str) -> None:
    assert "JSONDecodeError" not in out and "请报告这个问题" not in out, out
    assert "✓ 雷达数据库 · 页面登录" in out, out
    assert not re.search(r"^✗ ", out, re.M) and "，0 ✗：" in out, f"{block.where()}: a ✗ line\n{out}"


def test_the_one_host_guide_runs_as_written(tmp_path: Path) -> None:
    why = _why_not_here()
    if why:
        pytest.skip(f"the one-host guide is not run here: {why}")
    started = time.monotonic()
    passwords = {name: secrets.token_urlsafe(24) for name in ("RADAR_DB_PASSWORD", "RADAR_PAGES_DB_PASSWORD",
                                                              "AIRFLOW_DB_PASSWORD")}
    shell_home = tmp_path / "root-home"  # the reader's own shell: a directory radar cannot read
    shell_home.mkdir(mode=0o700)
    _reset()
    standins: dict[str, str] = {}
    running: list[subprocess.Popen[str]] = []

    def start_standins() -> None:
        proc, found = _standins()
        running.append(proc)
        standins.update(found)

    blocks = _all_blocks()
    after = [("-m venv /opt/radar/venv", lambda: (MARK.touch(), _install_the_lock(), start_standins())),
             ("$f.env.example", lambda: _fill_env_files(passwords, standins))]
    try:
        _walk(blocks, after, shell_home)
        _assert_the_api_server_holds_no_task_secret(tmp_path, running)
    finally:
        for proc in running:
            proc.kill()
            proc.wait()
        _reset()  # the server and the system as found: the suite's other tests share them (an `airflow` database)
    skipped = [b for b in blocks if b.skip]
    print(f"\nthe one-host guide: {len(blocks) - len(skipped)} blocks run as written, {len(skipped)} skipped "
          f"(marked in the Markdown), {time.monotonic() - started:.0f} s")


def _walk(blocks, after, shell_home: Path) -> None:
    for block in blocks:
        if block.skip:
            continue
        began = time.monotonic()
        # as long as the block works (spends CPU, writes output), however loaded the machine
        # what the reader types at a prompt: the admin's password, twice (Airflow asks for it again)
        typed = f"{ADMIN_PASSWORD}\n{ADMIN_PASSWORD}\n" if "airflow users create" in block.text else ""
        done = run(["bash", "-e", "-o", "pipefail", "-c", _typed(block.text)], cwd=shell_home,
                   env={"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb"}, typed=typed)
        print(_outcome(block, done, time.monotonic() - began), flush=True)
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{block.where()} failed as written:\n{block.text}\n{out[-4000:]}"
        if "airflow users create" in block.text:
            assert "created with role" in out, out
        if "include.radar.cli provision" in block.text:
            for login in ("role radar: created", "role radar_pages: created", "role airflow: created",
                          "database radar (owner radar): created", "database airflow (owner airflow): created"):
                assert login in out, out
        if block.text.rstrip().endswith(" check") or "pages.env check" in block.text:
            _assert_check(block, out)
        for anchor, step in after:
            if anchor in block.text:
                step()
    missing = [anchor for anchor, _ in after if not any(anchor in b.text for b in blocks if not b.skip)]
    assert missing == [], f"the guide no longer has a block with {missing}: the test's manual steps hang on them"
