"""The pages inside the real Airflow UI, as its users open them (Airflow's api-server, its React UI,
the plugin's external view in Chromium).

Airflow 3.3.2 shows a plugin's external view at ``/plugin/<url_route>`` in ``<iframe sandbox="allow-scripts
allow-same-origin allow-forms allow-downloads">`` (its built UI, ``r2t`` in ``airflow/ui/dist``): no
``allow-popups``, no ``allow-top-navigation``. So inside it a plain ``target="_blank"`` article link and a
``target="_top"`` Airflow link do nothing. The pages' one script (``static/frame.js``) hands such a click to
the Airflow window (same origin): the article opens in a new tab, the Airflow page replaces the UI. Links
between radar pages have no target and navigate inside the frame. This test clicks all three kinds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from include.radar.core.slots import SHANGHAI
from tests.browser import chromium, free_port, require_chromium, screenshot
from tests.pages import OPPORTUNITY, SECRET, Seeder, commit

REPO = Path(__file__).resolve().parents[1]


def _api_server(port: int, db_url: str, log: Path) -> subprocess.Popen:
    env = {**os.environ,
           "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
           "AIRFLOW__API__WORKERS": "1", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
           "RADAR_DATABASE_URL": db_url, "AIRFLOW_VAR_RADAR_LINK_SECRET": SECRET,
           "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": f"http://127.0.0.1:{port}/radar"}
    with log.open("w") as out:
        return subprocess.Popen(["airflow", "api-server", "--port", str(port)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _wait_up(url: str, proc: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the api-server did not answer {url}: {log.read_text()[-3000:]}")


@pytest.mark.browser
def test_links_work_inside_the_airflow_ui_iframe(seed: Seeder, db_url: str, tmp_path: Path) -> None:
    require_chromium()
    port = free_port()
    article_url = f"http://127.0.0.1:{port}/radar/static/icon.svg"  # a page the new tab can load offline
    today = datetime.now(SHANGHAI).date()
    morning = seed.slot(today, "07:00", new=1)
    analysis_id = seed.article(morning, "储能集采放量", 81, url=article_url, opportunities=[OPPORTUNITY])
    seed.close(morning)
    commit(seed)
    log = tmp_path / "api-server.log"
    server = _api_server(port, db_url, log)
    try:
        _wait_up(f"http://127.0.0.1:{port}/radar/static/icon.svg", server, log)
        with chromium() as browser:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{port}/plugin/radar")
            iframe = page.locator("iframe")
            iframe.wait_for(timeout=30_000)
            assert iframe.get_attribute("sandbox") == "allow-scripts allow-same-origin allow-forms allow-downloads"
            frame = page.frame_locator("iframe")
            # a link between radar pages navigates inside the frame; the Airflow UI stays around it
            frame.locator(f'a[href="/radar/analysis/{analysis_id}"]').first.click()
            frame.locator("text=对你有用吗").wait_for(timeout=15_000)
            inner = next(f for f in page.frames if "/radar/analysis/" in f.url)
            assert inner.url.endswith(f"/radar/analysis/{analysis_id}") and "/plugin/radar" in page.url
            screenshot(page, "airflow-iframe.png")
            # the article: a new tab, not nothing
            article = frame.locator('a:has-text("阅读原文")')
            assert article.get_attribute("target") == "_blank"
            with context.expect_page(timeout=15_000) as opened:
                article.click()
            tab = opened.value
            tab.wait_for_load_state()
            assert tab.url == article_url
            tab.close()
            # an Airflow page: the whole window goes there, not the frame
            run_link = frame.locator('a:has-text("Airflow 运行")').first
            assert run_link.get_attribute("target") == "_top"
            with page.expect_navigation(timeout=15_000):
                run_link.click()
            assert "/dags/opportunity_radar/runs/" in page.url and "/plugin/" not in page.url
            context.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
