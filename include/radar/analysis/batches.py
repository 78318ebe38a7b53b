"""Analysis batches: how a slot's articles are split over mapped tasks, and how one task runs its batch.

A task per article paid a process start-up per article, so the articles are split (``plan``) into a few
batches: at least ``analysis_tasks`` (the ``radar_llm`` pool's size), about ``MAX_BATCH`` articles each,
in full waves and whole rounds of a batch's threads. A batch runs its articles in
``ceil(llm_concurrency / analysis_tasks)`` threads, so about ``llm_concurrency`` calls are in flight across
the slot. Each article keeps its own claim and step record (``analyse:<item id>``); one that crashes does not
stop the others, and the batch fails at the end naming it, so a retry analyses only what is unfinished. A
configuration error stops the batch at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger(__name__)

MAX_BATCH = 50


class BatchFailed(RuntimeError):
    """Some articles of a batch crashed (each recorded on the slot); the others are analysed."""


def width(llm_concurrency: int, analysis_tasks: int) -> int:
    """Threads of one batch: the slot's calls in flight shared by the tasks that run at once."""
    return max(1, -(-llm_concurrency // analysis_tasks))


def plan(articles: list[dict[str, Any]], analysis_tasks: int, threads: int = 1) -> list[dict[str, Any]]:
    """Split the articles (oldest first) into contiguous batches, each labelled for the grid: about
    ``MAX_BATCH`` at most, in full waves of ``analysis_tasks``, and in whole rounds of the batch's ``threads``
    where there are enough articles (a batch of 50 in 8 threads waits a seventh round for 2 articles)."""
    if not articles:
        return []
    wanted = max(analysis_tasks, -(-len(articles) // MAX_BATCH))
    count = min(len(articles), -(-wanted // analysis_tasks) * analysis_tasks)
    batches = []
    start = 0
    for i, size in enumerate(_sizes(len(articles), count, threads)):
        part = articles[start : start + size]
        start += size
        first = part[0]["title"][:30]
        more = f" 等 {len(part)} 篇" if len(part) > 1 else ""
        batches.append({"batch": i + 1, "of": count, "articles": part,
                        "label": f"{i + 1}/{count} · {first}{more}"})
    return batches


def _sizes(n: int, count: int, threads: int) -> list[int]:
    """``count`` batch sizes adding up to ``n``: the rounds of ``threads`` shared out (the larger ones last),
    the last batches short of the rounds' total; near-equal when there are fewer rounds than batches."""
    rounds = -(-n // threads)
    if threads == 1 or rounds < count:
        return [(i + 1) * n // count - i * n // count for i in range(count)]
    sizes = [(rounds // count + (i >= count - rounds % count)) * threads for i in range(count)]
    excess = sum(sizes) - n
    for i in reversed(range(count)):
        cut = min(excess, sizes[i] - 1)
        sizes[i] -= cut
        excess -= cut
    return sizes


def run(
    articles: list[dict[str, Any]],
    analyse: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    threads: int,
    stop_on: tuple[type[BaseException], ...],
) -> dict[str, Any]:
    """Analyse every article with ``analyse`` (one article's whole ladder), ``threads`` at a time.

    ``stop_on``: errors after which no further article is started (the not-started ones stay pending, never
    claimed), re-raised as they are. Raises BatchFailed
    naming the articles that raised anything else; returns the outcomes and counts otherwise.
    """
    stop = threading.Event()
    outcomes: dict[int, dict[str, Any]] = {}
    crashes: list[tuple[dict[str, Any], BaseException]] = []
    lock = threading.Lock()

    def one(article: dict[str, Any]) -> None:
        if stop.is_set():
            with lock:
                outcomes[article["item_id"]] = {"content_item_id": article["item_id"], "status": "not_started"}
            return
        try:
            outcome = analyse(article)
        except BaseException as exc:  # every article's end is collected, then judged below
            if isinstance(exc, stop_on):
                stop.set()
            with lock:
                crashes.append((article, exc))
            return
        with lock:
            outcomes[article["item_id"]] = outcome

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(articles))), thread_name_prefix="analyse") as pool:
        for _ in pool.map(one, articles):
            pass
    fatal = next((exc for _, exc in crashes if isinstance(exc, stop_on)), None)
    if fatal is not None:
        raise fatal
    if crashes:
        named = "; ".join(f"{a['item_id']} 《{a['title'][:30]}》: {e.__class__.__name__}: {e}" for a, e in crashes[:5])
        more = f" (and {len(crashes) - 5} more)" if len(crashes) > 5 else ""
        raise BatchFailed(f"{len(crashes)} of {len(articles)} articles crashed: {named}{more}; the other "
                          f"articles are done, a retry analyses only the unfinished ones") from crashes[0][1]
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1
    log.info("batch of %d articles: %s", len(articles), ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return {"articles": len(articles), "counts": counts,
            "outcomes": [outcomes[a["item_id"]] for a in articles if a["item_id"] in outcomes]}
