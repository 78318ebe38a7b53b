"""Waiting on Airflow's processes for an event, never for a fixed number of seconds: ``make ui``'s start, the
tools that run a real Airflow (tools/local_airflow.py) and the suite's Airflow tests.

A wait gives up when a process it watches has exited (naming it, with the end of its log), or when nothing it
watches has moved for ``quiet`` seconds: every sign of progress (a task changing state, a log line of a shape
not seen before, CPU spent by a command) starts the count again, so a loaded machine that works slowly is
waited for and a stuck one is not. The clock is the radar's (``FixedClock(…, step=0)`` in a test: a poll's
sleep moves it, nothing waits).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from include.radar.core.clock import SYSTEM, Clock


class GaveUp(RuntimeError):
    """A wait that ended without its event: what it waited for, and why it stopped waiting."""


class Started(subprocess.Popen):
    """A process in its own group (stopping the group stops what it forks), its output in ``log``."""

    def __init__(self, log: Path, args: list[str], env: dict[str, str] | None = None):
        self.log = log
        with log.open("w") as out:
            super().__init__(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


class Proc(NamedTuple):
    pid: int
    ppid: int
    argv: tuple[str, ...]
    cpu: int  # clock ticks it and its reaped children have used


def processes() -> list[Proc]:
    """Every process of the machine, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue  # gone meanwhile
        found.append(Proc(int(stat.parent.name), int(fields[1]), tuple(a.decode(errors="replace") for a in argv if a),
                          sum(int(x) for x in fields[11:15])))
    return found


def subtree(table: list[Proc], roots: set[int]) -> list[Proc]:
    """The processes of ``table`` that are one of ``roots`` or descend from one."""
    inside, grew = set(roots), True
    while grew:
        more = {p.pid for p in table if p.ppid in inside} - inside
        inside, grew = inside | more, bool(more)
    return [p for p in table if p.pid in inside]


def family(pid: int) -> list[Proc]:
    """The process ``pid`` and every process it started that still runs (sudo's command in its own session too)."""
    return subtree(processes(), {pid})


_SHAPE = re.compile(r"\x1b\[[0-9;]*m|[0-9a-f]{8,}|\d+")


class NewLines:
    """How many shapes of line the logs have shown (digits, hex ids and colours set aside): an idle process's
    heartbeat repeats one shape, work brings new ones. Called again, it reads only what was added."""

    def __init__(self, *logs: Path) -> None:
        self.logs, self.read, self.shapes = logs, dict.fromkeys(logs, 0), set()

    def __call__(self) -> int:
        for log in self.logs:
            try:
                with log.open("rb") as f:
                    f.seek(self.read[log])
                    chunk = f.read()
            except OSError:
                continue
            whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is read next time
            self.read[log] += len(whole)
            self.shapes |= shapes(whole.decode(errors="replace"))
        return len(self.shapes)


def shapes(text: str) -> set[str]:
    """The shapes of ``text``'s lines: each with its digits, hex ids and colours set aside."""
    return {_SHAPE.sub("0", line) for line in text.splitlines()}


def sizes(*paths: Path) -> int:
    """The bytes in ``paths``, folders counted with everything under them."""
    total = 0
    for f in (f for p in paths for f in (p.rglob("*") if p.is_dir() else [p])):
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:
            pass  # gone meanwhile
    return total


def tail(log: Path | None, lines: int = 15) -> str:
    if log is None:
        return ""
    try:
        end = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return f"\n(no log at {log})"
    return f"\nthe end of {log}:\n" + "\n".join(end)


def name(proc: Any) -> str:
    return " ".join(str(a).rsplit("/", 1)[-1] for a in proc.args[:3]) if isinstance(proc.args, list) else str(proc.args)


def wait_for(check: Callable[[], Any], what: str, quiet: float, procs: Sequence[Any],
             progress: Callable[[], Any] | None = None, *, clock: Clock = SYSTEM, every: float = 0.5) -> Any:
    """Poll ``check`` until it returns something true, and return that. Give up (:class:`GaveUp`) when one of
    ``procs`` exits, or when ``progress()`` (by default the new lines of the processes' logs) has returned the
    same for ``quiet`` seconds."""
    progress = progress or NewLines(*(p.log for p in procs if getattr(p, "log", None)))
    seen, since = object(), clock.monotonic()
    while True:
        for p in procs:
            if p.poll() is not None:
                raise GaveUp(f"{name(p)} exited ({p.returncode}) while waiting for {what}{tail(getattr(p, 'log', None))}")
        value = check()
        if value:
            return value
        mark, now = progress(), clock.monotonic()
        if mark != seen:
            seen, since = mark, now
        elif now - since >= quiet:
            ends = "".join(tail(getattr(p, "log", None)) for p in procs)
            raise GaveUp(f"waited for {what}: nothing moved for {quiet:.0f} s (still {mark}){ends}")
        clock.sleep(every)


def run(args: list[str], *, quiet: float = 300, env: dict[str, str] | None = None, cwd: Path | None = None,
        progress: Callable[[], Any] | None = None, clock: Clock = SYSTEM,
        typed: str = "") -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True, input=typed)`` without a timeout: it waits while the
    command (with what it started) spends CPU or writes output (or ``progress()`` moves), and gives up, its process
    group killed, after ``quiet`` seconds of neither."""
    with tempfile.TemporaryDirectory(prefix="watched-") as folder:
        out, err, given = Path(folder) / "stdout", Path(folder) / "stderr", Path(folder) / "stdin"
        given.write_text(typed)
        with out.open("w") as stdout, err.open("w") as stderr, given.open() as stdin:
            proc = subprocess.Popen(args, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
                                    start_new_session=True)
        moved = progress or (lambda: None)
        try:
            wait_for(lambda: proc.poll() is not None, f"{name(proc)} to end", quiet, [],
                     lambda: (sum(p.cpu for p in family(proc.pid)), sizes(out, err), moved()), clock=clock)
        except GaveUp as exc:
            _kill(proc)
            raise GaveUp(f"{exc}{tail(out)}{tail(err)}") from None
        return subprocess.CompletedProcess(args, proc.returncode, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))


def _kill(proc: subprocess.Popen) -> None:
    """Kill the command and what it started, its group and any of its own sessions (sudo's)."""
    for pid in [p.pid for p in family(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
