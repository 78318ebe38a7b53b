"""Issue 24 §4 and §5: an outside answer is bounded by what it decodes to, and a paid call is made once
even when two tries of one analyse task run at the same time."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
from werkzeug.wrappers import Request, Response

from include.radar import http
from include.radar.llm import MAX_ANSWER_BYTES, LLMClient, LLMExhausted
from include.radar.schemas import ArticleAnalysis
from include.radar.werss import MAX_RESPONSE_BYTES, WeRSSClient, WeRSSError
from include.radar_demo.fakes import completion, serve
from tests.slotrun import answer

pytestmark = pytest.mark.hostile

# what the WeRSS stand-in sent: about 61 kB of gzip for a 63 MB body
BOMB_BYTES = 64 * 1024 * 1024


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


def _peak(call: Callable[[], object]) -> tuple[BaseException | None, int]:
    """What ``call`` raised, and the peak of Python allocations while it ran."""
    tracemalloc.start()
    try:
        call()
        raised = None
    except Exception as exc:  # noqa: BLE001 - the error is the result
        raised = exc
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return raised, peak


@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
def test_a_werss_compression_bomb_is_refused_once_it_decodes_past_the_cap(coding):
    body = _zeros_bomb(coding)
    assert len(body) < 100_000  # a small answer on the wire
    client = WeRSSClient(_server(body, {"Content-Encoding": coding}), access_key="ak", secret_key="sk", max_retries=0)
    raised, peak = _peak(client.accounts)
    assert isinstance(raised, WeRSSError)
    assert f"answer larger than {MAX_RESPONSE_BYTES} bytes once decoded" in str(raised)
    # the body kept is at most the cap: before, all 64 MB were decoded and joined (a peak of twice that)
    assert peak < 1.5 * MAX_RESPONSE_BYTES, f"peak {peak:,} bytes"


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_deepseek_compression_bomb_fails_the_rung_with_the_memory_bounded(coding):
    client = LLMClient(base_url=_server(_zeros_bomb(coding), {"Content-Encoding": coding}), api_key="sk-test",
                       model="deepseek-v4-pro", max_retries=0, backoff_seconds=0)
    raised, peak = _peak(lambda: client.complete_json("s", "u", ArticleAnalysis))
    assert isinstance(raised, LLMExhausted)
    assert f"ReadError: answer larger than {MAX_ANSWER_BYTES} bytes once decoded ({coding})" in str(raised)
    assert peak < 3 * MAX_ANSWER_BYTES, f"peak {peak:,} bytes"


def test_a_compressed_answer_within_the_cap_is_decoded_and_only_what_is_decoded_is_asked_for():
    seen: list[Request] = []
    rows = {"code": 0, "data": {"list": [{"id": "MP_WXS_1", "mp_name": "研究所"}], "total": 1}}
    base = _server(gzip.compress(json.dumps(rows).encode()), {"Content-Encoding": "gzip"}, seen)
    client = WeRSSClient(base, access_key="ak", secret_key="sk", max_retries=0)
    assert client.accounts()[0]["mp_name"] == "研究所"
    assert seen[0].headers["Accept-Encoding"] == "gzip, deflate"
    # DeepSeek through the openai SDK: the same transport, the same header, raw deflate accepted too
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    content = json.dumps(completion(answer(70))).encode()
    llm_seen: list[Request] = []
    llm = LLMClient(base_url=_server(raw.compress(content) + raw.flush(), {"Content-Encoding": "deflate"}, llm_seen),
                    api_key="sk-test", model="deepseek-v4-pro", max_retries=0, backoff_seconds=0)
    assert llm.complete_json("s", "u", ArticleAnalysis).value.score == 70
    assert llm_seen[0].headers["Accept-Encoding"] == "gzip, deflate"


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, gzip, gzip"])
def test_an_encoding_the_radar_does_not_decode_is_refused(coding):
    client = WeRSSClient(_server(b"{}", {"Content-Encoding": coding}), access_key="ak", secret_key="sk", max_retries=0)
    with pytest.raises(WeRSSError, match="content encoding the radar does not decode"):
        client.accounts()


def test_a_corrupt_encoding_fails_the_request_like_a_transport_error():
    client = WeRSSClient(_server(b"not gzip at all", {"Content-Encoding": "gzip"}), access_key="ak", secret_key="sk",
                         max_retries=0)
    with pytest.raises(WeRSSError, match="gzip encoding is corrupt"):
        client.accounts()


def test_the_decoded_cap_holds_outside_a_bound_too():
    body = _zeros_bomb("gzip")
    with http.client(20.0) as client, pytest.raises(Exception, match="once decoded"):
        client.get(_server(body, {"Content-Encoding": "gzip"}) + "/x")
