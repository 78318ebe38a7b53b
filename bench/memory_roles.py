"""Memory per Airflow process, by role (`make bench-memory`): which role a process plays, read from its command
line (Airflow sets process titles), and a sampler of a process tree once a second.

Roles: the scheduler, the LocalExecutor's idle workers (forks of the scheduler, waiting for a task), the
dag-processor (and the children that parse files), the api-server (and its workers), the triggerer (and its
trigger runner), a Celery worker (and its pool), and the two processes of a running task: its **supervisor**
(the executor's worker while it runs the task: ``airflow supervisor: <ti id>``, ``LocalExecutor: <ti id>``) and
its **task runner** (``airflow worker -- <ti id>``, the process that parses the DAG file and runs the step). A
process whose own title says nothing (a log server, a forked parser) takes the role of its nearest ancestor.

Figures are PSS (proportional set size: a page shared by n processes counts 1/n in each, so a role's sum is
what it costs the machine), USS (what the process alone holds: freed when it exits) and RSS (what ``top``
shows, shared pages counted in full).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

MB = 2**20
TI = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
SUPERVISOR, RUNNER = "task supervisor", "task runner"
# a process's own title -> its role; the first that matches wins (task titles before component names)
TITLES = (
    (re.compile(rf"airflow worker -- ({TI})"), RUNNER),
    (re.compile(rf"(?:supervisor: .*?|LocalExecutor\S*: )({TI})"), SUPERVISOR),
    (re.compile(r"LocalExecutor\S*: <idle>"), "executor workers (idle)"),
    (re.compile(r"\bcelery\b.*\bworker\b|celeryd|ForkPoolWorker"), "celery worker"),
    (re.compile(r"airflow[ -]+scheduler"), "scheduler"),
    (re.compile(r"airflow[ -]+dag[-_]processor"), "dag-processor"),
    (re.compile(r"airflow[ -]+api[-_]server"), "api-server"),
    (re.compile(r"airflow[ -]+triggerer"), "triggerer"),
    (re.compile(r"airflow[ -]+standalone"), "standalone (parent)"),
)
POSTGRES = "postgres backends"
ORDER = ("scheduler", "executor workers (idle)", "dag-processor", "api-server", "triggerer", "celery worker",
         SUPERVISOR, RUNNER, "standalone (parent)", "other", POSTGRES)


def own_role(title: str) -> tuple[str, str | None] | None:
    """The role a process title names, with the task instance id it carries (task processes), or None."""
    for pattern, role in TITLES:
        match = pattern.search(title)
        if match:
            return role, (match.group(1) if match.groups() else None)
    return None


def role_of(titles: list[str]) -> tuple[str, str | None]:
    """The role of a process from its own title and its ancestors' (nearest first): its own if it names one,
    else its nearest ancestor's component role (a task's children count as the task)."""
    for i, title in enumerate(titles):
        found = own_role(title)
        if found is not None:
            return found if i == 0 or found[0] in (SUPERVISOR, RUNNER) else (found[0], None)
    return "other", None


@dataclass
class Peak:
    """A role's peaks over the samples: the sum of its processes' PSS, its largest process (by PSS, with that
    process's USS and RSS), how many processes it had at most; and the sum at the last sample."""

    pss: int = 0
    single_pss: int = 0
    single_uss: int = 0
    single_rss: int = 0
    procs: int = 0
    last: int = 0

    def add(self, infos: list[Any]) -> None:
        total = sum(i.pss for i in infos)
        self.pss = max(self.pss, total)
        self.procs = max(self.procs, len(infos))
        self.last = total
        biggest = max(infos, key=lambda i: i.pss)
        if biggest.pss > self.single_pss:
            self.single_pss, self.single_uss, self.single_rss = biggest.pss, biggest.uss, biggest.rss


@dataclass(eq=False)
class Sampler(threading.Thread):
    """Samples every process under ``roots`` every ``interval`` seconds until :meth:`stop`: per role
    (:class:`Peak`), per task instance id and role (supervisor, runner), and the whole tree's PSS; and the
    processes ``backends`` names (the PostgreSQL backends serving them), apart from the tree."""

    roots: list[int]
    interval: float = 1.0
    backends: Callable[[], list[int]] | None = None
    roles: dict[str, Peak] = field(default_factory=lambda: defaultdict(Peak))
    tasks: dict[tuple[str, str], Peak] = field(default_factory=lambda: defaultdict(Peak))
    tree: int = 0
    samples: int = 0
    # every process seen: pid -> (role, its title, its peaks)
    procs: dict[int, tuple[str, str, Peak]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(daemon=True)
        self._running = True

    def sample(self) -> None:
        by_role: dict[str, list[Any]] = defaultdict(list)
        by_task: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for root in self.roots:
            titles: dict[int, str] = {}
            parents: dict[int, int] = {}
            procs = []
            try:
                top = psutil.Process(root)
                for p in [top, *top.children(recursive=True)]:
                    try:  # read every time: a LocalExecutor worker's title changes with the task it runs
                        titles[p.pid], parents[p.pid] = " ".join(p.cmdline()), p.ppid()
                        procs.append(p)
                    except psutil.Error:
                        pass
            except psutil.Error:
                continue
            for p in procs:
                if not titles[p.pid]:
                    continue  # starting or ending: no title to go by yet
                chain, pid = [], p.pid
                while pid in titles:
                    chain.append(titles[pid])
                    pid = parents[pid] if pid != root else -1
                role, ti = role_of(chain)
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue  # it ended meanwhile
                by_role[role].append(info)
                seen = self.procs.get(p.pid)
                peak = seen[2] if seen else Peak()
                peak.add([info])
                if seen is None or role not in (SUPERVISOR, RUNNER):  # a worker is listed under its idle role
                    self.procs[p.pid] = (role, chain[0], peak)
                if ti is not None:
                    by_task[(ti, role)].append(info)
        self.tree = max(self.tree, sum(i.pss for infos in by_role.values() for i in infos))
        for pid in self.backends() if self.backends else []:
            with contextlib.suppress(psutil.Error):
                by_role[POSTGRES].append(psutil.Process(pid).memory_full_info())
        for role, infos in by_role.items():
            self.roles[role].add(infos)
        for role in set(self.roles) - set(by_role):
            self.roles[role].last = 0
        for key, infos in by_task.items():
            self.tasks[key].add(infos)
        self.samples += 1

    def run(self) -> None:
        while self._running:
            started = time.monotonic()
            self.sample()
            time.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    def stop(self) -> None:
        self._running = False
        self.join(timeout=30)


def mb(value: float) -> str:
    return f"{value / MB:7.0f}"


def role_table(runs: dict[str, Sampler], *, diff: tuple[str, str] | None = None) -> list[str]:
    """The per-role table of one or more runs side by side; with ``diff`` = (bare, radar), what the radar adds
    (radar's peak minus bare's) per role."""
    names = list(runs)
    head = f"{'role':<24}" + "".join(f" | {n[:24]:^40}" for n in names) + (" | radar adds (PSS, largest)" if diff else "")
    sub = f"{'':<24}" + " | procs  PSS MB largest: PSS    USS    RSS" * len(names)
    lines = [head, sub]
    roles = [r for r in ORDER if any(r in s.roles for s in runs.values())]
    for role in roles:
        row = f"{role:<24}"
        for s in runs.values():
            p = s.roles.get(role)
            row += (f" | {p.procs:>5} {mb(p.pss)} {mb(p.single_pss)}{mb(p.single_uss)}{mb(p.single_rss)}"
                    if p else f" | {'-':>5} {'':>7} {'':>7}{'':>7}{'':>7}")
        if diff:
            a, b = runs[diff[0]].roles.get(role, Peak()), runs[diff[1]].roles.get(role, Peak())
            row += f" | {(b.pss - a.pss) / MB:+7.0f} {(b.single_pss - a.single_pss) / MB:+7.0f}"
        lines.append(row)
    row = f"{'Airflow (peak PSS)':<24}" + "".join(f" | {'':>5} {mb(s.tree)} {'':>21}" for s in runs.values())
    if diff:
        row += f" | {(runs[diff[1]].tree - runs[diff[0]].tree) / MB:+7.0f}"
    lines.append(row)
    return lines


def task_table(sampler: Sampler, names: dict[str, str], baseline: Peak | None = None) -> list[str]:
    """Per task id (``names``: ti id -> task id), the largest task runner and supervisor of its instances;
    with ``baseline`` (the bare DAG's one task runner), what the radar adds to a task runner."""
    per_task: dict[str, dict[str, Peak]] = defaultdict(dict)
    for (ti, role), peak in sampler.tasks.items():
        task = names.get(ti, f"? {ti[:8]}")
        best = per_task[task].get(role)
        if best is None or peak.single_pss > best.single_pss:
            per_task[task][role] = peak
    lines = [f"{'task':<24} | runner: PSS    USS    RSS | supervisor PSS" + (" | runner PSS vs bare" if baseline else "")]
    for task in sorted(per_task, key=lambda t: -per_task[t].get(RUNNER, Peak()).single_pss):
        runner, sup = per_task[task].get(RUNNER, Peak()), per_task[task].get(SUPERVISOR, Peak())
        if not runner.single_pss:  # it lived between two samples
            lines.append(f"{task:<24} | {'(not sampled)':>21} | {mb(sup.single_pss)}")
            continue
        line = f"{task:<24} | {mb(runner.single_pss)}{mb(runner.single_uss)}{mb(runner.single_rss)} | {mb(sup.single_pss)}"
        if baseline:
            line += f" | {(runner.single_pss - baseline.single_pss) / MB:+7.0f}"
        lines.append(line)
    return lines


def process_table(sampler: Sampler, roles: tuple[str, ...]) -> list[str]:
    """Every process of ``roles`` seen, with its own peaks (MB): where a role's memory is."""
    lines = [f"{'role':<24} {'pid':>7} | peak PSS    USS    RSS | title"]
    for pid, (role, title, peak) in sorted(sampler.procs.items(), key=lambda kv: (ORDER.index(kv[1][0]), -kv[1][2].pss)):
        if role in roles:
            lines.append(f"{role:<24} {pid:>7} |  {mb(peak.single_pss)}{mb(peak.single_uss)}{mb(peak.single_rss)} | {title[:70]}")
    return lines


def bare_runner(sampler: Sampler) -> Peak | None:
    """The largest task runner of a run (the bare DAG has one task)."""
    peaks = [p for (_, role), p in sampler.tasks.items() if role == RUNNER]
    return max(peaks, key=lambda p: p.single_pss) if peaks else None
