"""How much memory a compression bomb costs the radar's HTTP client.

A local server answers every request with a small compressed body that decodes to ``--decoded-mb`` MB of
zeros, under each ``Content-Encoding`` a hostile WeRSS or DeepSeek could send (gzip, deflate, stacked gzip).
The client is the one WeRSS and DeepSeek go through (include/radar/core/http.py), inside the same bound WeRSS
calls use (20 MB). The script prints, per encoding, the bytes on the wire, what the client made of them
(the body it accepted, or the error it raised) and the peak of Python allocations during the request
(tracemalloc): the client stops once the decoded body passes the cap, however small the compressed one.

    make bench-bomb                       # 100 MB decoded per bomb
    make bench-bomb ARGS="--decoded-mb 500"
"""

from __future__ import annotations

import argparse
import gzip
import logging
import tracemalloc
import zlib

from werkzeug.wrappers import Request, Response

from include.radar.collect.werss import MAX_RESPONSE_BYTES
from include.radar.core import http
from include.radar_demo.fakes import serve


def bombs(decoded: int) -> dict[str, bytes]:
    zeros = b"\0" * decoded
    once = gzip.compress(zeros, 9)
    return {
        "gzip": once,
        "deflate": zlib.compress(zeros, 9),
        "gzip, gzip": gzip.compress(once, 9),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decoded-mb", type=int, default=100, help="what each bomb decodes to (MB)")
    args = parser.parse_args()
    bodies = bombs(args.decoded_mb * 1_000_000)
    current: dict[str, str] = {}

    def handler(request: Request) -> Response:
        coding = current["coding"]
        return Response(bodies[coding], headers={"Content-Encoding": coding}, content_type="application/json")

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    base = "http://" + serve(handler)
    print(f"cap {MAX_RESPONSE_BYTES:,} bytes (WeRSS); each bomb decodes to {args.decoded_mb * 1_000_000:,} bytes")
    for coding, body in bodies.items():
        current["coding"] = coding
        client = http.client(20.0)
        tracemalloc.start()
        try:
            with http.limits(20.0, MAX_RESPONSE_BYTES):
                response = client.get(base + "/bomb")
            outcome = f"accepted a body of {len(response.content):,} bytes"
            del response
        except Exception as exc:  # what the client raised is the result
            outcome = f"refused: {exc.__class__.__name__}: {exc}"
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        client.close()
        print(f"  {coding:<11} {len(body):>9,} bytes on the wire -> {outcome}; peak allocations {peak / 1e6:,.1f} MB")


if __name__ == "__main__":
    main()
