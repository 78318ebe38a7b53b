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
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from include.radar.core.clock import Clock
from include.radar.core.slots import SHANGHAI
from include.radar_demo.waiting import NewLines, Started, family, wait_for
from tests.browser import chromium, free_port, require_chromium, screenshot
from tests.pages import OPPORTUNITY, SECRET, Seeder, commit

REPO = Path(__file__).resolve().parents[1]
QUIET = 300  # seconds in which the api-server logged no new kind of line, spent no CPU starting, sent no response


def _api_server(port: int, db_url: str, log: Path) -> Started:
    env = {**os.environ,
           "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
           "AIRFLOW__API__WORKERS": "1", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
           "RADAR_DATABASE_URL": db_url, "AIRFLOW_VAR_RADAR_LINK_SECRET": SECRET,
           "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": f"http://127.0.0.1:{port}/radar"}
    return Started(log, ["airflow", "api-server", "--port", str(port)], env)


def _wait_up(url: str, proc: Started) -> None:
    """Until ``url`` answers 200, while the api-server logs a new kind of line or, before its port answers, spends
    CPU (include/radar_demo/waiting.py)."""
    lines, answer = NewLines(proc.log), [None]

    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as said:
                answer[0] = said.status
        except urllib.error.HTTPError as exc:
            answer[0] = exc.code
        except OSError:
            answer[0] = None
        return answer[0] == 200

    def progress() -> tuple:
        return lines(), answer[0], answer[0] or sum(p.cpu for p in family(proc.pid))

    wait_for(answers, f"the api-server to answer {url}", QUIET, [proc], progress)


class _Browser(Clock):
    """Waits in the browser: until a check holds, while the browser still receives responses or the api-server
    logs a new kind of line (a page of Airflow's UI on a loaded machine loads slowly, not never). Its sleeps are
    Playwright's, so the browser's events arrive meanwhile."""

    def __init__(self, page, server: Started) -> None:
        self.page, self.server, self.responses, self.lines = page, server, [], NewLines(server.log)
        page.context.on("response", lambda answer: self.responses.append(answer.url))

    def sleep(self, seconds: float) -> None:
        self.page.wait_for_timeout(seconds * 1000)

    def __call__(self, check, what: str) -> None:
        wait_for(check, what, QUIET, [self.server], lambda: (len(self.responses), self.lines()), clock=self, every=0.25)


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
        _wait_up(f"http://127.0.0.1:{port}/radar/static/icon.svg", server)
        with chromium() as browser:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            until = _Browser(page, server)
            page.goto(f"http://127.0.0.1:{port}/plugin/radar", wait_until="commit")
            until(lambda: page.locator("iframe").count() == 1, "the plugin's iframe")
            assert page.locator("iframe").get_attribute("sandbox") == (
                "allow-scripts allow-same-origin allow-forms allow-downloads")
            frame = page.frame_locator("iframe")
            # a link between radar pages navigates inside the frame; the Airflow UI stays around it
            link = frame.locator(f'a[href="/radar/analysis/{analysis_id}"]').first
            until(lambda: link.count() == 1, "the link to the analysis in the frame")
            link.click()
            until(lambda: frame.locator("text=对你有用吗").count() > 0, "the analysis page in the frame")
            inner = next(f for f in page.frames if "/radar/analysis/" in f.url)
            assert inner.url.endswith(f"/radar/analysis/{analysis_id}") and "/plugin/radar" in page.url
            screenshot(page, "airflow-iframe.png")
            # the article: a new tab, not nothing
            article = frame.locator('a:has-text("阅读原文")')
            assert article.get_attribute("target") == "_blank"
            article.click()
            until(lambda: len(context.pages) == 2 and context.pages[1].url == article_url, "the article's tab")
            context.pages[1].close()
            # an Airflow page: the whole window goes there, not the frame
            run_link = frame.locator('a:has-text("Airflow 运行")').first
            assert run_link.get_attribute("target") == "_top"
            run_link.click()
            until(lambda: "/dags/opportunity_radar/runs/" in page.url, "the Airflow page of the run")
            assert "/plugin/" not in page.url
            context.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
