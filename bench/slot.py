"""What does a slot cost under a real scheduler: its LLM calls, or Airflow's task start-up?

Starts ``airflow standalone`` (the preloading LocalExecutor of `make ui`, metadata on PostgreSQL, its own database)
with the radar's DAG against stand-ins on loopback that look like a reader's day: a WeRSS holding N new
WeChat-like articles (include/radar_demo/wechat_pages.py: ~30 kB of HTML each, styled paragraphs, images,
banners, over ``ACCOUNTS`` accounts) and a DeepSeek that answers every call after L seconds, concurrently,
with the analysis a thinking model would give: a fifth of the articles score 60 or more with opportunities
whose evidence quotes the article (so the evidence check, event grouping and the push all run). For each N,
L and LLM concurrency C it empties the radar database, triggers one slot and prints:

- wall: the DAG run from its trigger (``queued_at``) to its end, and the analysis phase alone (first analyse
  task start to last analyse task end);
- ideal: ceil(N / C) × L, the time the LLM calls need at that concurrency; ratio = wall / ideal;
- at L = 0, the slot's cost as a fixed part plus a slope per article: a least-squares line through the
  sizes' walls, for each C (wall / N alone would hide the fixed part in small slots);
- peak memory: of Airflow's whole process tree (scheduler, api-server, dag-processor, triggerer, task
  processes; proportional set size, shared pages counted once) and the largest RSS of a single process;
- WeRSS detail calls, LLM calls (both must equal N: nothing fetched or paid twice, no re-ask) and pushes
  (exactly one: the slot's best opportunity);
- sessions: the connections the run opened to the radar database (``pg_stat_database.sessions``), per article;
- the goals, each ✓ or ✗: at most 2 connections per article; at L = 0 a fixed part ≤ 5 s and ≤ 0.03 s per
  article; wall / ideal ≤ 1.15 at N = 50, C = 8, L = 5 s and ≤ 1.2 at N = 200, C = 16, L = 5 s.

    make bench-slot                                        # N = 10, 50, 200; L = 0, 5 s; C = default, 8
    make bench-slot ARGS="--sizes 50 --latencies 5 --concurrency 8"
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

from include.radar import DAG_ID
from include.radar.core import db, loader
from include.radar.core.settings import Settings
from include.radar_demo import wechat_pages
from include.radar_demo.fakes import FakeArticle, FakeDeepSeek, FakeWeRSS, PushSink, serve
from tools.local_airflow import airflow, metadata, port_from, slots_now, standin_env, start, stop, wait_for

REPO = Path(__file__).resolve().parents[1]

BENCH_DB = "radar_bench_slot"
OUT = REPO / ".local" / "bench-slot"
PORT = port_from("RADAR_BENCH_PORT")
ACCOUNTS = 8
# the scores the stand-in gives, in turn: two in ten reach the push threshold (60), with opportunities
SCORES = (35, 48, 52, 66, 41, 30, 55, 74, 45, 20)


class Sampler(threading.Thread):
    """Peak memory of a process tree, sampled every second: the tree's proportional set size (shared pages
    counted once, which a sum of RSS of forked processes would not) and the largest single RSS."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(root)
        self.tree = self.single = 0
        self.running = True

    def run(self) -> None:
        while self.running:
            try:
                procs = [self.root, *self.root.children(recursive=True)]
                pss, rss = [], []
                for p in procs:
                    try:
                        info = p.memory_full_info()
                        pss.append(info.pss)
                        rss.append(info.rss)
                    except psutil.Error:
                        pass
                self.tree = max(self.tree, sum(pss))
                self.single = max(self.single, max(rss, default=0))
            except psutil.Error:
                pass
            time.sleep(1.0)

    def reset(self) -> None:
        self.tree = self.single = 0


def idle_cpu(root: int, seconds: float) -> float:
    """CPU time the process tree spends while no run is going on, as a share of one core."""
    def used() -> float:
        total = 0.0
        parent = psutil.Process(root)
        for p in [parent, *parent.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    before = used()
    time.sleep(seconds)
    return (used() - before) / seconds


def one_run(n: int, latency: float, concurrency: int | None, index: int, slot_epoch: int, conf: str, *, werss: FakeWeRSS,
            deepseek: FakeDeepSeek, sink: PushSink, env: dict[str, str], server_url: str, sampler: Sampler,
            proc: subprocess.Popen) -> dict[str, Any]:
    url = db.fresh_database(server_url, BENCH_DB)
    pages = {i: wechat_pages.page(f"{index}-{i}") for i in range(n)}
    werss.articles = [  # published before the slot's time (later ones belong to the next slot's window)
        FakeArticle(id=f"b{index}-{i}", mp_id=f"MP_WXS_{i % ACCOUNTS + 1}", title=page.title,
                    publish_time=slot_epoch - 60 - 60 * i, content_html=page.html,
                    url=f"https://mp.weixin.qq.com/s/b{index}-{i}")
        for i, page in pages.items()
    ]
    by_title = {page.title: (i, page) for i, page in pages.items()}
    werss.detail_calls.clear()
    deepseek.requests.clear()
    pushed = len(sink.received)

    def respond(body: dict[str, Any]) -> str:
        time.sleep(latency)
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        found = next((v for title, v in by_title.items() if f"标题：{title}" in user), None)
        if found is None:
            return "not an article of this run"
        i, page = found
        return wechat_pages.answer(page, SCORES[i % len(SCORES)])

    deepseek.responder = respond
    if concurrency is None:
        subprocess.run(["airflow", "variables", "delete", "radar_llm_concurrency"], env=env, capture_output=True)
    else:
        airflow("variables", "set", "radar_llm_concurrency", str(concurrency), env=env)
    run_id = f"bench_{index}_{int(time.time())}"
    before = sessions(url)
    sampler.reset()
    airflow("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", conf, env=env)
    with metadata() as meta:
        def finished() -> dict[str, Any] | None:
            row = meta.execute("SELECT state, queued_at, start_date, end_date FROM dag_run WHERE run_id = %s",
                               (run_id,)).fetchone()
            return row if row and row["state"] in ("success", "failed") else None

        run = wait_for(finished, f"run {run_id}", 1800, [proc])
        tis = meta.execute("SELECT task_id, map_index, state, start_date, end_date FROM task_instance "
                           "WHERE run_id = %s", (run_id,)).fetchall()
    analyses = [t for t in tis if t["task_id"] == "analyse" and t["start_date"] and t["end_date"]]
    phase = ((max(t["end_date"] for t in analyses) - min(t["start_date"] for t in analyses)).total_seconds()
             if analyses else 0.0)
    opened = sessions(url) - before - 1  # less the count's own
    with db.connect(url) as conn:
        stored = conn.execute(
            "SELECT (SELECT count(*) FROM analysis_result) AS analyses, (SELECT count(*) FROM analysis_result "
            "WHERE evidence_verified) AS verified, (SELECT count(*) FROM opportunity) AS opportunities"
        ).fetchone()
    return {
        "state": run["state"], "wall": (run["end_date"] - run["queued_at"]).total_seconds(),
        "queued": (run["start_date"] - run["queued_at"]).total_seconds(), "phase": phase,
        "batches": len([t for t in tis if t["task_id"] == "analyse"]),
        "failed_tasks": sorted({t["task_id"] for t in tis if t["state"] == "failed"}),
        "details": sum(werss.detail_calls.values()), "llm": len(deepseek.requests),
        "pushes": len(sink.received) - pushed, **stored,
        "rss_tree": sampler.tree, "rss_single": sampler.single, "sessions": opened,
    }


def sessions(url: str) -> int:
    """Sessions ever opened to the database of ``url`` (the statistics are flushed within a second)."""
    time.sleep(1.5)
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]


GOAL_SESSIONS, GOAL_FIXED, GOAL_SLOPE = 2.0, 5.0, 0.03
GOAL_RATIOS = {(50, 8, 5.0): 1.15, (200, 16, 5.0): 1.2}


def goal(text: str, met: bool) -> str:
    return f"[bench-slot] goal {'✓' if met else '✗'} {text}"


def fixed_and_slope(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """The least-squares line wall = fixed + slope × N through (N, wall) points; None with fewer than two Ns."""
    if len({n for n, _ in points}) < 2:
        return None
    mean_n = sum(n for n, _ in points) / len(points)
    mean_w = sum(w for _, w in points) / len(points)
    slope = sum((n - mean_n) * (w - mean_w) for n, w in points) / sum((n - mean_n) ** 2 for n, _ in points)
    return mean_w - slope * mean_n, slope


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,50,200", help="articles per slot (N), comma-separated")
    parser.add_argument("--latencies", default="0,5", help="seconds DeepSeek takes per call (L), comma-separated")
    parser.add_argument("--concurrency", default="default,8", help="llm_concurrency values (C); 'default' = the code's")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    latencies = [float(x) for x in args.latencies.split(",")]
    levels = [None if x == "default" else int(x) for x in args.concurrency.split(",")]
    default_c = Settings().llm_concurrency

    OUT.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the stand-ins' request lines
    werss = FakeWeRSS(accounts=[{"id": f"MP_WXS_{i}", "mp_name": f"研究所{i}"} for i in range(1, ACCOUNTS + 1)])
    deepseek = FakeDeepSeek(api_key="sk-bench")
    sink = PushSink()
    werss_at, deepseek_at, sink_at = serve(werss.handle), serve(deepseek.handle), serve(sink.handle)
    server_url = loader.load(use_airflow=False).database_url
    bench_url = db.fresh_database(server_url, BENCH_DB)
    plan = slots_now()
    daytime, daily, slot_epoch = plan.daytime, plan.daily, plan.slot_epoch
    env = {
        **os.environ,
        **standin_env(PORT, werss_at, deepseek_at, sink_at, "sk-bench"),
        "RADAR_DATABASE_URL": bench_url,
        "AIRFLOW_VAR_RADAR_SCHEDULE_SLOTS": json.dumps([daytime, daily]),
        "AIRFLOW_VAR_RADAR_MAX_ARTICLES_PER_SLOT": str(max(sizes)),
    }
    env.pop("AIRFLOW_VAR_RADAR_LLM_CONCURRENCY", None)  # set per run as an Airflow Variable
    log_file = OUT / "standalone.log"
    executor = os.environ.get("AIRFLOW__CORE__EXECUTOR", "LocalExecutor").rsplit(".", 1)[-1]
    print(f"[bench-slot] airflow standalone ({executor}, {psutil.cpu_count()} cores); slot {daytime} "
          f"(Asia/Shanghai); WeChat-like pages of ~{len(wechat_pages.page(0).html.encode()) // 1024} kB over "
          f"{ACCOUNTS} accounts, {sum(x >= 60 for x in SCORES)} in {len(SCORES)} scoring 60+; logs in {log_file}",
          flush=True)
    subprocess.run(["airflow", "dags", "delete", "-y", DAG_ID], env=env, capture_output=True)  # earlier benches' runs
    proc = start(log_file, ["airflow", "standalone"], env)
    rows: list[str] = []
    goals: list[str] = []
    walls: dict[int, list[tuple[int, float]]] = {}
    try:
        with metadata() as meta:
            wait_for(lambda: meta.execute("SELECT 1 FROM dag WHERE dag_id = %s", (DAG_ID,)).fetchone(),
                     "the DAG to be parsed", 300, [proc])
        airflow("dags", "unpause", DAG_ID, env=env)
        # unpausing starts a run for the schedule's latest tick (the daily slot, hours ago): let it end first
        # (WeRSS has no articles yet); the next tick is hours away. Every run then is the same daytime slot,
        # triggered by name with its push forced, as on a reader's day (each from an empty radar database)
        with metadata() as meta:
            wait_for(lambda: meta.execute(
                "SELECT 1 FROM dag_run WHERE dag_id = %s AND run_type = 'scheduled' AND state IN ('success', 'failed')",
                (DAG_ID,)).fetchone(), "the run of the schedule's latest tick", 300, [proc])
        idle = idle_cpu(proc.pid, 20)
        print(f"[bench-slot] idle: Airflow's processes use {idle:.0%} of a core between runs "
              f"(scheduler_idle_sleep_time {os.environ.get('AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME', 'default')})",
              flush=True)
        sampler = Sampler(proc.pid)
        sampler.start()
        header = (f"{'N':>4} {'L s':>4} {'C':>4} {'batches':>7} {'wall s':>7} {'queued':>6} {'phase s':>7} "
                  f"{'ideal s':>7} {'ratio':>6} {'phase':>6} {'PSS MB':>7} {'RSS MB':>7} {'detail':>6} {'LLM':>5} "
                  f"{'opps':>5} {'push':>4} {'conns':>5} {'/art':>5} state")
        print(header, flush=True)
        index = 0
        for latency in latencies:
            for n in sizes:
                for level in levels:
                    index += 1
                    c = level or default_c
                    r = one_run(n, latency, level, index, slot_epoch, plan.conf(), werss=werss, deepseek=deepseek, sink=sink,
                                env=env, server_url=server_url, sampler=sampler, proc=proc)
                    ideal = math.ceil(n / c) * latency
                    ratio = f"{r['wall'] / ideal:6.2f}" if ideal else f"{'-':>6}"
                    phase_ratio = f"{r['phase'] / ideal:6.2f}" if ideal else f"{'-':>6}"
                    if latency == 0:
                        walls.setdefault(c, []).append((n, r["wall"]))
                    ok = ("ok" if r["details"] == n and r["llm"] == n and r["analyses"] == n and r["pushes"] == 1
                          and r["state"] == "success" else "MISMATCH")
                    line = (f"{n:>4} {latency:>4g} {c:>4} {r['batches']:>7} {r['wall']:>7.1f} {r['queued']:>6.1f} "
                            f"{r['phase']:>7.1f} {ideal:>7.1f} {ratio} {phase_ratio} {r['rss_tree'] / 2**20:>7.0f} "
                            f"{r['rss_single'] / 2**20:>7.0f} {r['details']:>6} {r['llm']:>5} {r['opportunities']:>5} "
                            f"{r['pushes']:>4} {r['sessions']:>5} {r['sessions'] / n:>5.2f} {r['state']} {ok}"
                            + (f" failed: {','.join(r['failed_tasks'])}" if r["failed_tasks"] else ""))
                    rows.append(line)
                    print(line, flush=True)
                    goals.append(goal(f"{r['sessions'] / n:.2f} connections per article ≤ {GOAL_SESSIONS:g} "
                                      f"(N = {n}, L = {latency:g}, C = {c})", r["sessions"] / n <= GOAL_SESSIONS))
                    wanted = GOAL_RATIOS.get((n, c, latency))
                    if wanted is not None:
                        goals.append(goal(f"wall / ideal {r['wall'] / ideal:.2f} ≤ {wanted:g} at N = {n}, C = {c}, "
                                          f"L = {latency:g} s", r["wall"] / ideal <= wanted))
        sampler.running = False
    finally:
        stop([proc])
    fits = []
    for c, points in sorted(walls.items()):
        fit = fixed_and_slope(points)
        if fit:
            fits.append(f"[bench-slot] at L = 0, C = {c}: a slot costs {fit[0]:.1f} s fixed + {fit[1]:.3f} s per "
                        f"article (least squares over N = {', '.join(str(n) for n, _ in points)})")
            goals.append(goal(f"fixed {fit[0]:.1f} s ≤ {GOAL_FIXED:g} s at L = 0, C = {c}", fit[0] <= GOAL_FIXED))
            goals.append(goal(f"{fit[1]:.3f} s per article ≤ {GOAL_SLOPE:g} s at L = 0, C = {c}",
                              fit[1] <= GOAL_SLOPE))
    for line in [*fits, *goals]:
        print(line)
    (OUT / "results.txt").write_text("\n".join([header, *rows, *fits, *goals]) + "\n")
    print(f"[bench-slot] wall = the DAG run from its trigger (queued_at) to its end; queued = trigger to start; "
          f"phase = the analyse tasks' first start to last end; ideal = ceil(N/C) × L; PSS = the Airflow tree's "
          f"peak, RSS = the largest process's; opps = opportunities stored; push = messages the slot pushed; "
          f"conns = connections the run opened to the radar database, /art per article. "
          f"Results in {OUT / 'results.txt'}")
    return 0 if all("MISMATCH" not in r for r in rows) else 1  # a goal missed is a figure, not a failure


if __name__ == "__main__":
    sys.exit(main())
