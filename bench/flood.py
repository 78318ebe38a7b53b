"""make bench-flood: a flood of readers through one pushed link, and what it does to Airflow's own API.

Against a running ``make ui`` on loopback (``RADAR_UI_PORT``, default 8080): signs today's daily link with the
demo's link secret (.local/demo/link_secret, the one ``make ui`` gives the api-server), then

1. **idle**: Airflow's ``/api/v2/monitor/health`` every 50 ms for ``--idle-seconds``;
2. **flood**: ``--readers`` readers (one process, a raw HTTP/1.1 client on kept-alive connections: cheap enough
   that the server, not the readers, is what is measured) each ask for the link again as soon as it answers, for ``--seconds`` or ``--max-requests`` pages in all, whichever comes first, while the health
   endpoint is asked every 50 ms from another process (so the readers' own load does not delay its timing).

Prints the health endpoint's p50 / p95 idle and under the flood, and the pages: how many, by status, each
status's p50 / p95, and of the refusals how many were answered at once and how many held. Bounded: loopback only, a cap on time and on requests, a 30 s timeout per request.

    make ui &                      # in another shell, once it prints its URL
    make bench-flood ARGS="--readers 100 --seconds 30"
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx

from include.radar.core import signing
from include.radar.core.slots import SHANGHAI

REPO = Path(__file__).resolve().parents[1]

PROBE_EVERY = 0.05
TIMEOUT = 30.0
HELD_MS = 1000.0  # a refusal answered later than this was held (web/admission.py holds them 2 s)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def daily_link(base: str, secret: str) -> str:
    path = f"/daily/{datetime.now(SHANGHAI).date().isoformat()}"
    query = signing.sign(path, secret, datetime.now(UTC), 1)
    return f"{base}/radar{path}?{urlencode(query)}"


def probe(base: str, seconds: float, out: multiprocessing.Queue) -> None:
    """Airflow's health endpoint every PROBE_EVERY seconds for ``seconds``: each answer's time in ms."""
    took: list[float] = []
    failed = 0
    with httpx.Client(timeout=TIMEOUT) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            try:
                ok = client.get(f"{base}/api/v2/monitor/health").status_code == 200
            except httpx.HTTPError:
                ok = False
            took.append((time.perf_counter() - started) * 1000)
            failed += not ok
            time.sleep(max(0.0, PROBE_EVERY - (time.perf_counter() - started)))
    out.put((took, failed))


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> str:
    """One request on a kept-alive connection, its body read and dropped: the status (what a reader needs
    no more of: a raw HTTP/1.1 client, so that the readers' side costs little of the machine)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b" ", 2)[1].decode()
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _flood(link: str, readers: int, seconds: float, cap: int) -> dict[str, list[float]]:
    by_status: dict[str, list[float]] = defaultdict(list)
    sent = 0
    end = time.monotonic() + seconds
    url = urlsplit(link)
    request = (f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\nUser-Agent: bench-flood\r\n"
               "Accept: text/html\r\n\r\n").encode()

    async def one_reader() -> None:
        nonlocal sent
        connection = None
        while time.monotonic() < end and sent < cap:
            sent += 1
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection(url.hostname, url.port)
                status = await asyncio.wait_for(_ask(*connection, request), TIMEOUT)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError) as exc:
                status, connection = type(exc).__name__, None
            by_status[status].append((time.perf_counter() - started) * 1000)
        if connection is not None:
            connection[1].close()

    await asyncio.gather(*(one_reader() for _ in range(readers)))
    return dict(by_status)


def flood(link: str, readers: int, seconds: float, cap: int, out: multiprocessing.Queue) -> None:
    out.put(asyncio.run(_flood(link, readers, seconds, cap)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("RADAR_UI_PORT", "8080")))
    parser.add_argument("--readers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument("--link", help="a signed page URL (default: today's daily page, signed with the demo's secret)")
    args = parser.parse_args()
    if not 1 <= args.readers <= 500 or not 0 < args.seconds <= 120:
        parser.error("at most 500 readers for at most 120 s")
    base = f"http://127.0.0.1:{args.port}"
    secret_file = REPO / ".local" / "demo" / "link_secret"
    link = args.link or daily_link(base, secret_file.read_text().strip())
    if urlsplit(link).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("loopback only")
    first = httpx.get(link, timeout=TIMEOUT)
    if first.status_code != 200:
        print(f"[bench-flood] the link answers {first.status_code}: is `make ui` running on port {args.port}?")
        return 1
    queue: multiprocessing.Queue = multiprocessing.Queue()
    print(f"[bench-flood] {base}: idle {args.idle_seconds:g} s, then {args.readers} readers of one daily link for "
          f"{args.seconds:g} s (at most {args.max_requests:,} pages); load before: {os.getloadavg()[0]:.1f}", flush=True)
    probe(base, args.idle_seconds, queue)
    idle, idle_failed = queue.get()
    prober = multiprocessing.Process(target=probe, args=(base, args.seconds, queue))
    readers = multiprocessing.Process(target=flood, args=(link, args.readers, args.seconds, args.max_requests, queue))
    prober.start()
    readers.start()
    results = [queue.get(timeout=args.seconds + 2 * TIMEOUT + 30) for _ in range(2)]
    prober.join()
    readers.join()
    (loaded, loaded_failed), pages = sorted(results, key=lambda r: isinstance(r, dict))
    print(f"health idle:        p50 {pct(idle, .5):6.1f} ms  p95 {pct(idle, .95):6.1f} ms  ({len(idle)} asks, "
          f"{idle_failed} failed)")
    print(f"health under flood: p50 {pct(loaded, .5):6.1f} ms  p95 {pct(loaded, .95):6.1f} ms  max "
          f"{max(loaded, default=float('nan')):.0f} ms  ({len(loaded)} asks, {loaded_failed} failed)")
    total = sum(len(v) for v in pages.values())
    print(f"pages: {total:,} in {args.seconds:g} s ({total / args.seconds:.0f}/s); load after: {os.getloadavg()[0]:.1f}")
    for status, took in sorted(pages.items()):
        print(f"  {status:>14}: {len(took):7,}  p50 {statistics.median(took):7.1f} ms  p95 {pct(took, .95):7.1f} ms")
        if status in ("429", "503"):  # answered at once, or held (web/admission.py: HOLD_SECONDS)
            fast = [t for t in took if t < HELD_MS]
            print(f"  {'':>14}  {len(fast):7,} within {HELD_MS:g} ms (p50 {pct(fast, .5):.1f}, p95 {pct(fast, .95):.1f}), "
                  f"{len(took) - len(fast):,} held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
