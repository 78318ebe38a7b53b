"""Browser-test harness: the report app served by a real uvicorn, driven by the system Chromium via Playwright.

Playwright is used only as a driver (``executable_path`` = Debian's ``/usr/bin/chromium``): nothing is
downloaded. Without Chromium the browser tests skip with the command that installs it.

    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport=PHONE)
        page.goto(base + signed("/daily/2026-01-08"))
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
# an iPhone-sized viewport: how readers open pushed links
PHONE: dict[str, Any] = {"width": 390, "height": 844}
SCREENSHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


def have_chromium() -> bool:
    return Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is not None


def require_chromium() -> None:
    if not have_chromium():
        pytest.skip("Chromium not installed: apt-get install -y chromium (Debian) to run the browser tests")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(app: Any, *, root_path: str = "") -> Iterator[str]:
    """Serve ``app`` on a free local port in a thread; yields its base URL (with ``root_path``)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", root_path=root_path)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}{root_path}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless system Chromium under Playwright (skips the test when Chromium is missing)."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-quic"]
        )
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str) -> Path:
    """A full-page PNG of ``page`` in artifacts/screenshots (docs/screenshots holds the curated copies)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return shot
