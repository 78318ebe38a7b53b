"""An outside answer is bounded by what it decodes to, and a paid call is made once
even when two tries of one analyse task run at the same time.

Rooms: http.py (bounded answers), llm.py, werss.py, analyst.py and store/claims.py (two tries, one call),
steps/analyse.py, steps/close_slot.py.
"""

from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable
from datetime import timedelta

import pytest
from werkzeug.wrappers import Request, Response

from include.radar import store
from include.radar.analysis import analyst, batches, llm
from include.radar.analysis.llm import MAX_ANSWER_BYTES, LLMClient, LLMExhausted, LLMOptions
from include.radar.analysis.schemas import ArticleAnalysis
from include.radar.collect.werss import MAX_RESPONSE_BYTES, Credentials, WeRSSClient, WeRSSError
from include.radar.core import http
from include.radar.steps.analyse import analyse, claimer
from include.radar.steps.close_slot import close_slot
from include.radar.steps.ingest import ingest
from include.radar.steps.open_slot import open_slot
from include.radar.steps.runtime import Runtime
from include.radar.steps.select_articles import articles_to_analyse
from include.radar_demo.fakes import completion, serve
from tests.conftest import connect
from tests.slotrun import answer, article, shanghai

pytestmark = pytest.mark.hostile

# what the WeRSS stand-in sent: about 61 kB of gzip for a 63 MB body
BOMB_BYTES = 64 * 1024 * 1024
KEYS = Credentials(access_key="ak", secret_key="sk")


@functools.lru_cache
def _zeros_bomb(coding: str) -> bytes:
    zeros = b"\0" * BOMB_BYTES
    if coding == "gzip":
        return gzip.compress(zeros, 9)
    if coding == "deflate":
        return zlib.compress(zeros, 9)
    if coding == "gzip, gzip":
        return gzip.compress(gzip.compress(zeros, 9), 9)
    raise AssertionError(coding)


def _server(body: bytes, headers: dict[str, str], seen: list[Request] | None = None) -> str:
    def handle(request: Request) -> Response:
        if seen is not None:
            seen.append(request)
        return Response(body, headers=headers, content_type="application/json")

    return "http://" + serve(handle)


# The bomb's server runs in its own process, so that the peak measured below is the client's alone (a server
# thread in this process allocates buffers of its own while it answers).
_BOMB_SERVER = r"""
import http.server, sys
body, coding = sys.stdin.buffer.read(), sys.argv[1]

class Answer(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer()

    def answer(self):
        self.send_response(200)
        for name, value in (("Content-Type", "application/json"), ("Content-Encoding", coding),
                            ("Content-Length", str(len(body)))):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
print(server.server_port, flush=True)
server.serve_forever()
"""


@pytest.fixture
def bomb_server():
    """``serve(coding)``: a server in another process answering every request with a bomb of ``coding``."""
    started: list[subprocess.Popen] = []

    def serve_bomb(coding: str) -> str:
        process = subprocess.Popen([sys.executable, "-c", _BOMB_SERVER, coding], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE)
        started.append(process)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(_zeros_bomb(coding))
        process.stdin.close()
        return f"http://127.0.0.1:{int(process.stdout.readline())}"

    yield serve_bomb
    for process in started:
        process.kill()
        process.wait()


def _peak(call: Callable[[], object]) -> tuple[BaseException | None, int]:
    """What ``call`` raised, and the peak of Python allocations while it ran."""
    tracemalloc.start()
    try:
        call()
        raised = None
    except Exception as exc:  # the error is the result
        raised = exc
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return raised, peak


@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
def test_a_werss_compression_bomb_is_refused_once_it_decodes_past_the_cap(coding, bomb_server):
    assert len(_zeros_bomb(coding)) < 100_000  # a small answer on the wire
    client = WeRSSClient(bomb_server(coding), KEYS, max_retries=0)
    raised, peak = _peak(client.accounts)
    assert isinstance(raised, WeRSSError)
    assert f"answer larger than {MAX_RESPONSE_BYTES} bytes once decoded" in str(raised)
    # the body kept is at most the cap: before, all 64 MB were decoded and joined (a peak of twice that)
    assert peak < 1.5 * MAX_RESPONSE_BYTES, f"peak {peak:,} bytes"


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_deepseek_compression_bomb_fails_the_rung_with_the_memory_bounded(coding, bomb_server):
    client = LLMClient(base_url=bomb_server(coding), api_key="sk-test", model="deepseek-v4-pro",
                       options=LLMOptions(max_retries=0, backoff_seconds=0))
    raised, peak = _peak(lambda: client.complete_json("s", "u", ArticleAnalysis))
    assert isinstance(raised, LLMExhausted)
    assert f"ReadError: answer larger than {MAX_ANSWER_BYTES} bytes once decoded ({coding})" in str(raised)
    assert peak < 2 * MAX_ANSWER_BYTES, f"peak {peak:,} bytes"


def test_a_compressed_answer_within_the_cap_is_decoded_and_only_what_is_decoded_is_asked_for():
    seen: list[Request] = []
    rows = {"code": 0, "data": {"list": [{"id": "MP_WXS_1", "mp_name": "研究所"}], "total": 1}}
    base = _server(gzip.compress(json.dumps(rows).encode()), {"Content-Encoding": "gzip"}, seen)
    client = WeRSSClient(base, KEYS, max_retries=0)
    assert client.accounts()[0]["mp_name"] == "研究所"
    assert seen[0].headers["Accept-Encoding"] == "gzip, deflate"
    # DeepSeek through the openai SDK: the same transport, the same header, raw deflate accepted too
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    content = json.dumps(completion(answer(70))).encode()
    llm_seen: list[Request] = []
    llm = LLMClient(base_url=_server(raw.compress(content) + raw.flush(), {"Content-Encoding": "deflate"}, llm_seen),
                    api_key="sk-test", model="deepseek-v4-pro", options=LLMOptions(max_retries=0, backoff_seconds=0))
    assert llm.complete_json("s", "u", ArticleAnalysis).value.score == 70
    assert llm_seen[0].headers["Accept-Encoding"] == "gzip, deflate"


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, gzip, gzip"])
def test_an_encoding_the_radar_does_not_decode_is_refused(coding):
    client = WeRSSClient(_server(b"{}", {"Content-Encoding": coding}), KEYS, max_retries=0)
    with pytest.raises(WeRSSError, match="content encoding the radar does not decode"):
        client.accounts()


def test_a_corrupt_encoding_fails_the_request_like_a_transport_error():
    client = WeRSSClient(_server(b"not gzip at all", {"Content-Encoding": "gzip"}), KEYS, max_retries=0)
    with pytest.raises(WeRSSError, match="gzip encoding is corrupt"):
        client.accounts()


def test_the_decoded_cap_holds_outside_a_bound_too():
    body = _zeros_bomb("gzip")
    with http.client(20.0) as client, pytest.raises(Exception, match="once decoded"):
        client.get(_server(body, {"Content-Encoding": "gzip"}) + "/x")


# ---------------------------------------------------------------- claims belong to a task try


SLOT = shanghai(2026, 1, 8, 14)


def _batch(fakes, n: int, run: str = "scheduled__run-1"):
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    for i in range(1, n + 1):
        fakes.werss.articles.append(article(i, SLOT - timedelta(minutes=10 + i), title=f"文章{i}"))
    fakes.at(SLOT)
    rt = Runtime.load()
    slot = open_slot(rt, run_after=SLOT, run_type="scheduled", dag_id="d", dag_run_id=run, params={})
    ingest(rt, slot)
    [batch] = batches.plan(articles_to_analyse(rt, slot), 1)
    return rt, slot, batch


def _attempts() -> dict[int, list[str]]:
    with connect() as conn:
        rows = conn.execute("SELECT content_item_id, outcome FROM analysis_attempt ORDER BY id").fetchall()
    out: dict[int, list[str]] = {}
    for r in rows:
        out.setdefault(r["content_item_id"], []).append(r["outcome"])
    return out


def test_two_tries_of_one_batch_running_at_once_call_deepseek_once_per_article(fakes, monkeypatch):
    """A retry started while the earlier try still lives (a zombie whose worker lost its heartbeat): each
    article is analysed by one try, the other waits for it and reuses the analysis."""
    monkeypatch.setattr(analyst, "BUSY_POLL_SECONDS", 0.1)
    rt, slot, batch = _batch(fakes, 4)

    def slow(body):
        time.sleep(0.5)
        return answer(70)

    fakes.deepseek.responder = slow
    barrier = threading.Barrier(2)
    results: dict[int, dict] = {}

    def run(try_number: int) -> None:
        barrier.wait()
        results[try_number] = analyse(rt, slot, batch, seconds=120, attempt=("analyse", 0, try_number))

    tries = [threading.Thread(target=run, args=(n,)) for n in (1, 2)]
    for t in tries:
        t.start()
    for t in tries:
        t.join()
    assert len(fakes.deepseek.requests) == 4
    assert all(outcomes == ["analysed"] for outcomes in _attempts().values()) and len(_attempts()) == 4
    counts = [results[n]["counts"] for n in (1, 2)]
    assert sum(c.get("analysed", 0) for c in counts) == 4 and sum(c.get("skipped", 0) for c in counts) == 4


def test_a_retry_takes_over_a_dead_tries_claim_once_its_lease_ran_out(fakes, monkeypatch):
    monkeypatch.setattr(analyst, "BUSY_POLL_SECONDS", 0.1)
    rt, slot, batch = _batch(fakes, 1)
    item_id = batch["articles"][0]["item_id"]
    with connect() as conn:  # try 1 claimed it and died: nothing renews its lease
        claim = store.claims.claim_item(conn, item_id, slot_run_id=slot["slot_run_id"], max_attempts=3,
                                 claimer=claimer(slot, ("analyse", 0, 1)), lease=timedelta(seconds=1))
    assert claim.state == "claimed"
    fakes.deepseek.responder = lambda body: answer(70)
    result = analyse(rt, slot, batch, seconds=120, attempt=("analyse", 0, 2))
    assert result["counts"] == {"analysed": 1} and len(fakes.deepseek.requests) == 1
    with connect() as conn:
        dead, retry = conn.execute("SELECT * FROM analysis_attempt ORDER BY id").fetchall()
    assert (dead["outcome"], retry["outcome"]) == ("crashed", "analysed")
    assert dead["finished_at"] >= dead["lease_until"]  # taken over only after its lease ran out
    assert retry["claimed_by"] == f"{slot['dag_run_id']}|analyse|0|2"


def test_a_live_try_keeps_its_claim_and_another_try_does_not_take_it(fakes, monkeypatch):
    monkeypatch.setattr(analyst, "BUSY_POLL_SECONDS", 0.1)
    rt, slot, batch = _batch(fakes, 1)
    item_id = batch["articles"][0]["item_id"]
    zombie = claimer(slot, ("analyse", 0, 1))
    with connect() as conn:
        store.claims.claim_item(conn, item_id, slot_run_id=slot["slot_run_id"], max_attempts=3, claimer=zombie,
                         lease=timedelta(seconds=1))
        first = conn.execute("SELECT lease_until FROM content_item WHERE id = %s", (item_id,)).fetchone()
    fakes.deepseek.responder = lambda body: answer(70)
    with analyst.ClaimKeeper(rt.connect, zombie, every=0.2) as keeper:
        # the retry waits as long as its own time allows (here about 3 s), then leaves the article to the zombie
        result = analyse(rt, slot, batch, seconds=llm.MIN_CALL_SECONDS + 3,
                                        attempt=("analyse", 0, 2))
        renewed = keeper.renewals
    assert result["counts"] == {"skipped": 1} and fakes.deepseek.requests == []
    assert renewed >= 5
    with connect() as conn:
        item = conn.execute("SELECT * FROM content_item WHERE id = %s", (item_id,)).fetchone()
    assert item["claimed_by"] == zombie and item["analyzed_status"] == store.common.ANALYSING
    assert item["lease_until"] > first["lease_until"] + timedelta(minutes=4)  # renewed to a full lease


def test_the_claim_keeper_stops_renewing_past_the_tries_time_limit(fakes):
    rt, slot, batch = _batch(fakes, 1)
    owner = claimer(slot, ("analyse", 0, 1))
    with analyst.ClaimKeeper(rt.connect, owner, every=0.1, until=time.monotonic() + 0.35) as keeper:
        time.sleep(1.0)
        renewed = keeper.renewals
        assert not keeper._thread.is_alive()  # it stopped by itself: a hung try does not hold its claims for ever
        time.sleep(0.3)
        assert keeper.renewals == renewed
    assert 1 <= renewed <= 3  # it renewed while the try had time (every 0.1 s for 0.35 s), then no more


def test_close_slot_fails_the_lapsed_claims_of_every_try_of_its_run_and_no_others(fakes):
    rt, slot, batch = _batch(fakes, 3, run="manual__run-1")
    first, second, third = (a["item_id"] for a in batch["articles"])
    with connect() as conn:
        # a try of this run killed mid-call (its lease ran out); a run whose id starts with this one's; a try of
        # this run whose holder still renews its lease (a zombie still calling DeepSeek)
        store.claims.claim_item(conn, first, slot_run_id=slot["slot_run_id"], max_attempts=3,
                         claimer=claimer(slot, ("analyse", 0, 3)), lease=timedelta(seconds=-1))
        store.claims.claim_item(conn, second, slot_run_id=slot["slot_run_id"], max_attempts=3,
                         claimer=store.claims.claim_owner("manual__run-10", "analyse", 0, 1), lease=timedelta(seconds=-1))
        store.claims.claim_item(conn, third, slot_run_id=slot["slot_run_id"], max_attempts=3,
                         claimer=claimer(slot, ("analyse", 1, 1)))
    close_slot(rt, slot, [])
    assert _attempts() == {first: ["crashed"], second: ["running"], third: ["running"]}
    with connect() as conn:  # the zombie's article is not offered to a later slot while its lease runs
        offered = {r["id"] for r in store.claims.items_to_analyse(conn, max_attempts=3, limit=10)}
    assert third not in offered



# ----------------------------------------------- the calls made through requests: push channels, akshare


def test_a_push_channels_compression_bomb_fails_the_send_with_the_memory_bounded(bomb_server):
    """apprise posts through requests (its own sessions, no transport of ours): the send is capped where
    requests reads the body, what it decodes counted."""
    import apprise

    from include.radar.pushes import push

    [channel] = push.channels_from([bomb_server("gzip").replace("http://", "json://") + "/hook"])
    apprise.Apprise.instantiate(channel.url)  # apprise loads its plugin before the measure: no part of the send
    errors: list[str | None] = []
    raised, peak = _peak(lambda: errors.append(push.send_one(channel, "标题", "正文")))
    assert raised is None and errors[0] is not None, (raised, errors)  # before: "sent", after 64 MB decoded
    assert peak < 4 * http.REQUESTS_PUSH_MAX_BYTES, f"peak {peak:,} bytes"


def test_an_akshare_compression_bomb_fails_the_call_with_the_memory_bounded(bomb_server, monkeypatch):
    """akshare reads Eastmoney and Sina through requests too (some over plain http): capped the same way, in
    the thread the call runs in."""
    import types

    import requests

    from include.radar.market import SourceError
    from include.radar.market.akshare_source import LibraryCaller

    url = bomb_server("gzip")
    monkeypatch.setitem(sys.modules, "akshare", types.SimpleNamespace(
        stock_zh_a_hist=lambda **kwargs: requests.get(url, timeout=10).json()))
    raised, peak = _peak(lambda: LibraryCaller(timeout=60, min_interval=0)("stock_zh_a_hist", symbol="600519"))
    assert isinstance(raised, SourceError) and "once decoded" in str(raised), raised
    assert peak < 3 * http.REQUESTS_MARKET_MAX_BYTES, f"peak {peak:,} bytes"


def test_akshares_shenwan_index_calls_verify_tls(monkeypatch):
    """akshare's index_hist_sw asks requests for ``verify=False``: through the radar's caller it verifies all
    the same (the transport is a stand-in here: no network)."""
    import json as json_

    import requests

    from include.radar.market.akshare_source import LibraryCaller

    seen: list[object] = []

    def send(self, request, **kwargs):
        seen.append(kwargs.get("verify"))
        answer = requests.Response()
        answer.status_code, answer.url, answer.request = 200, request.url, request
        answer._content = json_.dumps({"data": [{
            "swindexcode": "801081", "bargaindate": "2026-01-08", "openindex": 1.0, "maxindex": 2.0, "minindex": 0.5,
            "closeindex": 1.5, "hike": 0, "markup": 0, "bargainamount": 1, "bargainsum": 1}]}).encode()
        return answer

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", send)
    rows = LibraryCaller(timeout=60, min_interval=0)("index_hist_sw", symbol="801081", period="day")
    assert [r["收盘"] for r in rows] == [1.5]
    assert len(seen) == 1 and seen[0] not in (False, None)  # True, or the CA bundle REQUESTS_CA_BUNDLE names
    requests.get("https://example.invalid/x", verify=False)  # outside the caller, requests is left as it was
    assert seen[1] is False
