"""Outgoing HTTP with a total deadline and a size cap per request (WeRSS and DeepSeek both go through here).

httpx's timeouts, like every socket timeout, are per operation: a server that trickles one byte a second
never trips a 20-second read timeout, and DeepSeek under load holds a request open for minutes with blank
keep-alive lines. Here every connect, read and write of a request waits at most until that request's
deadline, and its reads stop once the response passes ``max_bytes``: a slow or huge answer costs a bounded
time and memory, and the call fails with a timeout the callers already handle.

The bound lives in the network backend (one level below HTTP), so it holds for the status line, the headers
and the body alike, in the calling thread (no helper thread that could outlive the task). A request opens
its bound with :func:`limits`; requests made outside one keep the client's own timeouts.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpcore2
import httpx2

DEFAULT_MAX_BYTES = 20_000_000
# httpx2 logs every request at INFO; the radar's own log lines say what each call was for
logging.getLogger("httpx2").setLevel(logging.WARNING)


@dataclass
class _Budget:
    deadline: float  # time.monotonic()
    seconds: float
    max_bytes: int
    received: int = field(default=0)

    def remaining(self, timeout: float | None, exc: type[Exception]) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise exc(f"no complete answer within {self.seconds:.3g}s")
        return left if timeout is None else min(timeout, left)


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("radar_http_budget", default=None)


@contextlib.contextmanager
def limits(seconds: float, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[None]:
    """Bound every request made inside the block: together at most ``seconds`` and ``max_bytes`` each."""
    token = _budget.set(_Budget(time.monotonic() + seconds, seconds, max_bytes))
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


class BoundedTransport(httpx2.HTTPTransport):
    """httpx2's transport on the bounded network backend (same pool settings, no proxy support)."""

    def __init__(self, *, max_connections: int = 20) -> None:
        super().__init__(trust_env=False)
        self._pool.close()
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=5.0,
            network_backend=_Backend(),
        )


def client(timeout: float, *, max_connections: int = 20, **kwargs: Any) -> httpx2.Client:
    """An httpx2 client whose requests honour :func:`limits` (the environment's proxies are not used);
    ``max_connections``: requests in flight at once (more wait for a connection, on their own deadline)."""
    return httpx2.Client(transport=BoundedTransport(max_connections=max_connections), timeout=timeout,
                         trust_env=False, **kwargs)
