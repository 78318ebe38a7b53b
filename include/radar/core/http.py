"""Outgoing HTTP with a total deadline and a size cap per request (WeRSS and DeepSeek both go through here).

Socket timeouts are per operation (a server trickling a byte a second never trips a read timeout), so here
every connect, read and write of a request waits at most until the request's deadline (:func:`limits`), in
the network backend and the calling thread, and reads stop once the response passes ``max_bytes``. The cap
holds for what a body *decodes* to: httpx decodes ``Content-Encoding`` after counting the bytes, so the
transport asks only for gzip and deflate, decodes them itself in bounded pieces while counting, and refuses
any other encoding (a compression bomb costs at most ``max_bytes``; ``make bench-bomb``). The push channels
and market data go through ``requests``: their bodies are capped by :func:`requests_capped`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import ssl
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import httpcore2
import httpx2

from include.radar.core.clock import SYSTEM

DEFAULT_MAX_BYTES = 20_000_000
# what the transport decodes itself, and asks servers for (an answer in any other encoding is refused)
ACCEPT_ENCODING = "gzip, deflate"
_ZLIB_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# encodings one answer may stack (a real server sends one; each stage is bounded anyway)
MAX_CODINGS = 2
# the most one decompression step produces: memory stays bounded whatever the ratio
DECODE_CHUNK = 64 * 1024
# httpx2 logs every request at INFO; the radar's own log lines say what each call was for
logging.getLogger("httpx2").setLevel(logging.WARNING)


@dataclass
class _Budget:
    deadline: float  # SYSTEM.monotonic()
    seconds: float
    max_bytes: int
    received: int = field(default=0)

    def remaining(self, timeout: float | None, exc: type[Exception]) -> float:
        left = self.deadline - SYSTEM.monotonic()
        if left <= 0:
            raise exc(f"no complete answer within {self.seconds:.3g}s")
        return left if timeout is None else min(timeout, left)


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("radar_http_budget", default=None)


@contextlib.contextmanager
def limits(seconds: float, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[None]:
    """Bound every request made inside the block: together at most ``seconds`` and ``max_bytes`` each."""
    token = _budget.set(_Budget(SYSTEM.monotonic() + seconds, seconds, max_bytes))
    try:
        yield
    finally:
        _budget.reset(token)


def _bounded(timeout: float | None, exc: type[Exception]) -> float | None:
    budget = _budget.get()
    return timeout if budget is None else budget.remaining(timeout, exc)


class _Stream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._inner.read(max_bytes, _bounded(timeout, httpcore2.ReadTimeout))
        budget = _budget.get()
        if budget is not None:
            budget.received += len(data)
            if budget.received > budget.max_bytes:
                raise httpcore2.ReadError(f"answer larger than {budget.max_bytes} bytes")
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout, httpcore2.ConnectTimeout))
        return _Stream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        bounded = _bounded(timeout, httpcore2.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        bounded = _bounded(timeout, httpcore2.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Decoded(httpx2.SyncByteStream):
    """A response body as it decodes, never more than ``max_bytes`` at any stage (see the module docstring)."""

    def __init__(self, raw: httpx2.SyncByteStream, codings: list[str], max_bytes: int,
                 budget: _Budget | None) -> None:
        self._raw = raw
        self._codings = codings
        self._max_bytes = max_bytes
        self._budget = budget

    def __iter__(self) -> Iterator[bytes]:
        chunks: Iterator[bytes] = iter(self._raw)
        for coding in reversed(self._codings):  # the last encoding applied is undone first
            chunks = self._inflate(chunks, coding)
        yield from self._counted(chunks, "")

    def _counted(self, chunks: Iterable[bytes], stage: str) -> Iterator[bytes]:
        produced = 0
        for chunk in chunks:
            produced += len(chunk)
            if produced > self._max_bytes:
                raise httpx2.ReadError(f"answer larger than {self._max_bytes} bytes{stage}")
            if self._budget is not None:  # decoding spends the request's time too
                self._budget.remaining(None, httpx2.ReadTimeout)
            yield chunk

    def _inflate(self, chunks: Iterator[bytes], coding: str) -> Iterator[bytes]:
        return self._counted(_inflated(chunks, coding), f" once decoded ({coding})")

    def close(self) -> None:
        self._raw.close()


def _inflated(chunks: Iterator[bytes], coding: str) -> Iterator[bytes]:
    """``chunks`` decompressed, at most :data:`DECODE_CHUNK` bytes per step (``max_length``), so one input
    chunk of a 1000:1 bomb never becomes one large allocation. Bytes after the end of the stream are ignored
    (as httpx does); a ``deflate`` body without its zlib header (some servers send raw deflate) is read as
    raw deflate."""
    decompressor = zlib.decompressobj(_ZLIB_WBITS[coding])
    started = False
    for chunk in chunks:
        data, out = chunk, b"x"
        # until the input is used up and a step brings nothing more (zlib may hold output back for a full step)
        while (data or out) and not decompressor.eof:
            try:
                out = decompressor.decompress(data, DECODE_CHUNK)
            except zlib.error as exc:
                if coding == "deflate" and not started:
                    decompressor, started = zlib.decompressobj(-zlib.MAX_WBITS), True
                    continue
                raise httpx2.ReadError(f"answer's {coding} encoding is corrupt ({exc})") from None
            started = True
            data = decompressor.unconsumed_tail
            if out:
                yield out
    if not decompressor.eof:
        try:
            tail = decompressor.flush()
        except zlib.error as exc:
            raise httpx2.ReadError(f"answer's {coding} encoding is corrupt ({exc})") from None
        if tail:
            yield tail


def _codings(headers: httpx2.Headers) -> list[str]:
    """The content codings applied to a body, in the order they were applied (identity dropped)."""
    codings = []
    for value in headers.get_list("content-encoding", split_commas=True):
        coding = value.strip().lower()
        if coding and coding != "identity":
            codings.append(coding)
    return codings


@cache
def _ssl_context() -> ssl.SSLContext:
    """The verifying TLS context every client of the process shares: loading the CA bundle takes ~26 ms, and a
    client per article (the demo's and the tests' way) paid it twice each. A context is safe to share between
    threads and connections once configured."""
    return httpx2.create_ssl_context(trust_env=False)


class BoundedTransport(httpx2.HTTPTransport):
    """httpx2's transport on the bounded network backend (same pool settings, no proxy support), whose
    bodies are decoded here and capped by their decoded size (see the module docstring)."""

    def __init__(self, *, max_connections: int = 20) -> None:
        super().__init__(verify=_ssl_context(), trust_env=False)
        self._pool.close()
        self._pool = httpcore2.ConnectionPool(
            ssl_context=_ssl_context(),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=5.0,
            network_backend=_Backend(),
        )

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        budget = _budget.get()
        response = super().handle_request(request)
        codings = _codings(response.headers)
        refused = [c for c in codings if c not in _ZLIB_WBITS]
        if refused or len(codings) > MAX_CODINGS:
            response.close()
            raise httpx2.ReadError(f"answer in a content encoding the radar does not decode ({', '.join(codings)})")
        assert isinstance(response.stream, httpx2.SyncByteStream)
        headers = [(k, v) for k, v in response.headers.raw
                   if k.lower() not in (b"content-encoding", b"content-length")] if codings else response.headers.raw
        return httpx2.Response(
            status_code=response.status_code, headers=headers, extensions=response.extensions,
            stream=_Decoded(response.stream, codings, budget.max_bytes if budget else DEFAULT_MAX_BYTES, budget),
        )


def client(timeout: float, *, max_connections: int = 20, **kwargs: Any) -> httpx2.Client:
    """An httpx2 client whose requests honour :func:`limits` (the environment's proxies are not used);
    ``max_connections``: requests in flight at once (more wait for a connection, on their own deadline)."""
    return httpx2.Client(transport=BoundedTransport(max_connections=max_connections), timeout=timeout,
                         trust_env=False, **kwargs)


# ------------------------------------------------------------------- calls the radar makes through requests

# apprise (the push channels) and akshare (market data) make their own calls through ``requests``, each plugin
# or function with a session of its own: no transport of ours can be put under them. Their bodies are capped
# where requests reads them instead: ``Response.iter_content``, which ``Response.content`` (and so ``.text``,
# ``.json()``) reads through, and which counts what urllib3 decoded (urllib3 ≥ 2.6 decodes in bounded pieces).
# The cap holds in the thread (context) that opened :func:`requests_capped`, nowhere else.
REQUESTS_PUSH_MAX_BYTES = 1_000_000  # a push channel's answer is an acknowledgement of a few hundred bytes
REQUESTS_MARKET_MAX_BYTES = 50_000_000  # akshare's largest answer the radar asks for is a few MB (a day's quotes)
_requests_cap: contextvars.ContextVar[int | None] = contextvars.ContextVar("radar_requests_cap", default=None)


class AnswerTooLarge(ValueError):
    """A body read through requests passed its cap once decoded."""


@contextlib.contextmanager
def requests_capped(max_bytes: int) -> Iterator[None]:
    """While open, a body read through ``requests`` in this thread fails past ``max_bytes`` once decoded
    (requests' own :class:`requests.exceptions.ContentDecodingError`, which its callers handle as a failed
    request), after at most that many bytes were kept."""
    _install_requests_cap()
    token = _requests_cap.set(max_bytes)
    try:
        yield
    finally:
        _requests_cap.reset(token)


def _install_requests_cap() -> None:
    import requests  # only the tasks that push or read market data use it

    original = requests.models.Response.iter_content
    if getattr(original, "radar_capped", False):
        return

    def iter_content(self: Any, chunk_size: int | None = 1, decode_unicode: bool = False) -> Any:
        chunks = original(self, chunk_size, decode_unicode)
        cap = _requests_cap.get()
        return chunks if cap is None else _capped(self, chunks, cap)

    def _capped(response: Any, chunks: Iterable[Any], cap: int) -> Iterator[Any]:
        seen = 0
        for chunk in chunks:
            seen += len(chunk)
            if seen > cap:
                response.close()
                raise requests.exceptions.ContentDecodingError(
                    AnswerTooLarge(f"answer larger than {cap} bytes once decoded"))
            yield chunk

    iter_content.radar_capped = True  # type: ignore[attr-defined]
    requests.models.Response.iter_content = iter_content  # type: ignore[method-assign]


# Whatever a library asks of requests, the radar's calls through it verify TLS: akshare's Shenwan index calls
# pass ``verify=False`` themselves. Held in the thread (context) that opened :func:`requests_verified`.
_requests_verify: contextvars.ContextVar[bool] = contextvars.ContextVar("radar_requests_verify", default=False)
_VERIFY_POSITION = 11  # Session.request(method, url, params, data, headers, cookies, files, auth, timeout,
#                        allow_redirects, proxies, hooks, stream, verify, ...): verify's index after url


@contextlib.contextmanager
def requests_verified() -> Iterator[None]:
    """While open, every request ``requests`` makes in this thread verifies the server's certificate (against
    requests' CA bundle, or ``REQUESTS_CA_BUNDLE``), whatever its caller passed or its session says: a benchmark
    from a server that cannot prove who it is would be anyone's numbers."""
    _install_requests_verify()
    token = _requests_verify.set(True)
    try:
        yield
    finally:
        _requests_verify.reset(token)


def _install_requests_verify() -> None:
    import requests

    original = requests.sessions.Session.request
    if getattr(original, "radar_verified", False):
        return

    def request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if _requests_verify.get():
            if len(args) > _VERIFY_POSITION:
                args = (*args[:_VERIFY_POSITION], True, *args[_VERIFY_POSITION + 1:])
            else:
                kwargs["verify"] = True
        return original(self, method, url, *args, **kwargs)

    request.radar_verified = True  # type: ignore[attr-defined]
    requests.sessions.Session.request = request  # type: ignore[method-assign]
