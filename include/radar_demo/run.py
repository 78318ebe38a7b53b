"""The offline demo day (``make run``): the five slots of one day through the real DAG, no network.

A local WeRSS stand-in serves the sample articles (include/radar_demo/data) through the real API, a local
OpenAI-compatible stand-in answers with recorded sample answers, and pushes land in a local JSON webhook —
three channels on it, one per form a channel shows (plain text, Markdown, HTML) — that writes
``.local/demo/pushes.jsonl`` and each push in each form to ``.local/demo/pushes/``. The demo uses its own database (``radar_demo``) on the radar's
PostgreSQL server and recreates it on every run. Everything it stores is labelled as demo data.
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import secrets
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from include.radar import store
from include.radar.check.schedule import suggested_cron
from include.radar.core import db, loader
from include.radar.core.clock import FixedClock
from include.radar.core.settings import Settings
from include.radar.core.slots import SHANGHAI, slot_at
from include.radar_demo import evaluation_demo, history
from include.radar_demo.fakes import FakeArticle, FakeDeepSeek, FakeWeRSS, PushSink, collection_task, serve

log = logging.getLogger("radar.demo")
DATA = Path(__file__).with_name("data")
# the demo's plain-text channel has one address for `make run` and `make ui` (which keeps to it): exactly-once is
# per channel, so a scheduled run in `make ui` sees the demo day's messages as already sent to it, not to a new one
PUSH_PORT = int(os.environ.get("RADAR_DEMO_PUSH_PORT", "18765"))
PUSH_FORMS = {"text": "txt", "markdown": "md", "html": "html"}  # the forms a channel shows (push.channel_form)


def push_urls(at: str) -> list[str]:
    """Three channels on the one sink, a form each (a generic webhook takes the URL's ``?format=``); apprise's
    ``:format=`` adds the form to the JSON it posts, so the sink can tell them apart."""
    return [f"json://{at}/demo" + ("" if form == "text" else f"/{form}?format={form}&:format={form}")
            for form in PUSH_FORMS]

OUT = db.REPO_ROOT / ".local" / "demo"
DEMO_DB = "radar_demo"
UI_BASE = "http://localhost:8080/radar"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


# the demo reader follows chip equipment and robots, and never wants award announcements (喜报) analysed
DEMO_PROFILE = {"companies": [], "tickers": [], "sectors": ["半导体设备", "人形机器人"],
                "interests": ["国产替代的订单拐点"], "rules": ["!喜报"]}


DEMO_COLLECTION_CRON = suggested_cron(Settings.model_fields["schedule_slots"].default)


def demo_day() -> date:
    return datetime.now(SHANGHAI).date()


def build_werss(day: date, clock: list[int]) -> FakeWeRSS:
    midnight = int(datetime.combine(day, datetime.min.time(), tzinfo=SHANGHAI).timestamp())
    articles = []
    for a in load("articles.json"):
        late = a.get("body_appears_after_minutes")
        articles.append(FakeArticle(
            id=a["id"], mp_id=a["mp_id"], title=a["title"], url=a["url"], description=a.get("description", ""),
            publish_time=midnight + 60 * a["publish_offset_minutes"], content_html=a["content_html"],
            content=a.get("content") if not a["content_html"] else None,
            body_after=midnight + 60 * late if late is not None else None,
            late_content_html=a.get("late_content_html", ""),
        ))
    # WeRSS collects only through a message task: the demo's covers every account 30 minutes before each slot,
    # applied (「应用」) and run by WeRSS's scheduler; saved on 2026-01-01, which a WeRSS newer than v1.4.9 says
    # (updated_at), so that check can tell its runs from an earlier version's on a first look
    task = {**collection_task(DEMO_COLLECTION_CRON), "updated_at": "2026-01-01 08:00:00"}
    werss = FakeWeRSS(accounts=load("accounts.json"), articles=articles, username="demo", password="demo-password",
                      now=lambda: clock[0], message_tasks=[task], scheduler_running=True)
    werss.apply()
    return werss


def build_deepseek() -> FakeDeepSeek:
    """Answers from the recorded sample answers: the article is recognised by its title in the prompt, and the
    model by its name (deepseek-flash has recordings of its own where it answers differently: the evaluation's)."""
    by_title = {a["title"]: a["id"] for a in load("articles.json")}
    recorded = load("answers.json")
    by_model = {"deepseek-flash": {**recorded, **load("answers_flash.json")}}
    digest = load("digest.json")

    def respond(body: dict[str, Any]) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "<<<DATA_START>>>" in user:
            data = json.loads(user.split("<<<DATA_START>>>", 1)[1].split("<<<DATA_END>>>", 1)[0])
            ids = {a["title"]: a["analysis_id"] for a in data["analyses"]}
            tops = [{**t, "analysis_id": ids.get(t["title"], 0)} for t in digest["top_opportunities"]]
            return json.dumps({**digest, "top_opportunities": tops}, ensure_ascii=False)
        match = re.search(r"^标题：(.*)$", user, re.MULTILINE)
        article_id = by_title.get(match.group(1).strip()) if match else None
        answer = by_model.get(body.get("model"), recorded).get(article_id or "")
        if answer is None:
            answer = {"score": 10, "has_opportunity": False, "top_type": "none",
                      "summary": "（演示）没有录制的回答：按无机会处理。", "opportunities": []}
        log.info("[demo] LLM stand-in answers for %r with a recorded answer (score %s)",
                 match.group(1)[:30] if match else "?", answer["score"])
        return json.dumps(answer, ensure_ascii=False)

    return FakeDeepSeek(responder=respond, api_key="sk-demo")


# the recorded market answers (include/radar_demo/data/market, tools/market_fixtures.py) start in this week;
# the demo replays them on its own week (whole weeks: weekdays stay weekdays), labelled as demo data
MARKET = DATA / "market"
MARKET_WEEK = date(2026, 2, 2)
RECORD_LATER = timedelta(days=42)  # the record as it stands six weeks after the demo day: T+20 measured


def market_shift_weeks(day: date) -> int:
    return ((day - timedelta(days=day.weekday())) - MARKET_WEEK).days // 7


def link_secret() -> str:
    path = OUT / "link_secret"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
    return path.read_text().strip()


def demo_environment(url: str, werss_at: str, deepseek_at: str, sink_at: str, secret: str, day: date) -> dict[str, str]:
    """The connections and settings the demo's tasks read: the stand-ins, the demo's database, recorded prices."""
    return {
        "RADAR_DATABASE_URL": url,
        "AIRFLOW_CONN_WERSS_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{werss_at}",
                                                  "login": "demo", "password": "demo-password"}),
        "AIRFLOW_CONN_DEEPSEEK_DEFAULT": json.dumps({"conn_type": "http", "host": f"http://{deepseek_at}",
                                                     "password": "sk-demo", "extra": {"backoff_seconds": 0}}),
        "AIRFLOW_CONN_RADAR_PUSH": json.dumps({"conn_type": "generic", "extra": {"urls": push_urls(sink_at)}}),
        "AIRFLOW_VAR_RADAR_DEMO_MODE": "true",
        # the day's five slots are replayed at once, and dag.test() leaves each run's deadline behind: `make ui`,
        # on the same metadata database, would later mark all five missed
        "AIRFLOW_VAR_RADAR_DAILY_DEADLINE_ALERT": "false",
        "AIRFLOW_VAR_RADAR_LINK_SECRET": secret,
        "AIRFLOW_VAR_RADAR_REPORT_BASE_URL": UI_BASE,
        # the demo replays today's five slots now: none of them counts as a late start
        "AIRFLOW_VAR_RADAR_LATE_AFTER_MINUTES": str(366 * 24 * 60),
        # the track record replays recorded market answers (no network), moved onto the demo's week
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SOURCE": "recorded",
        "AIRFLOW_VAR_RADAR_MARKET_DATA_RECORDED_DIR": str(MARKET),
        "AIRFLOW_VAR_RADAR_MARKET_DATA_SHIFT_WEEKS": str(market_shift_weeks(day)),
        "AIRFLOW_VAR_RADAR_PUSH_MARKET_CONTEXT": "true",  # the pushes say each target's move on those prices
    }


def run_slots(day: date, url: str, clock: list[int], sink: PushSink, deepseek: FakeDeepSeek, say: Any) -> None:
    """The day's five slots through the real DAG (dag.test()), one after the other, each said with its pushes."""
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(db.REPO_ROOT / "dags")).dags["opportunity_radar_slots"]
    for slot in ("07:00", "12:00", "14:00", "18:00", "22:00"):
        key = slot_at(day, slot)
        clock[0] = int(key.scheduled_at.timestamp())
        before = len(sink.received)
        t0 = time.monotonic()
        # a second past the tick: the demo's runs are its own, so a scheduler started later (`make ui`) still
        # creates the real run of the same tick instead of finding its logical date taken; run_after says the
        # run is replayed at its time (not a past-dated manual run, which would push nothing)
        at = key.scheduled_at + timedelta(seconds=1)
        run = dag.test(logical_date=at, run_after=at)
        date_pushes_at_slot(url, day, slot, key.scheduled_at + timedelta(seconds=time.monotonic() - t0))
        sent = sink.received[before:]
        say(f"[demo] slot {slot}: DAG run {run.state}, {len(deepseek.requests)} LLM calls so far, "
            f"{len(sent)} pushed ({time.monotonic() - t0:.0f}s)")
        for message in sent:
            save_push(slot, message)
            if message.get("format", "text") == "text":  # the plain form, as a phone's plain channel shows it
                say(f"         → {message['title']}\n" + "\n".join(
                    f"           {line}" if line else "" for line in message["message"].splitlines()))


def save_push(slot: str, message: dict[str, Any]) -> Path:
    """One push as one form's channel got it, in ``.local/demo/pushes/`` (``0700.md``: the 07:00 push, Markdown)."""
    form = message.get("format", "text")
    folder = OUT / "pushes"
    folder.mkdir(exist_ok=True)
    path = folder / f"{slot.replace(':', '')}.{PUSH_FORMS.get(form, 'txt')}"
    title, body = message["title"], message["message"]
    if form == "html":
        text = (f'<!doctype html><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
                f"<b>{html.escape(title)}</b><br>\n{body}\n")
    else:
        text = f"{'**' + title + '**' if form == 'markdown' else title}\n\n{body}\n"
    path.write_text(text, encoding="utf-8")
    return path


def day_counts(url: str) -> dict[str, Any]:
    with db.connect(url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM content_item) AS articles, (SELECT count(*) FROM analysis_result) AS analyses,"
            " (SELECT count(*) FROM slot_run WHERE status = 1) AS slots_ok,"
            " (SELECT coalesce(sum(excluded_count), 0) FROM slot_run) AS excluded"
        ).fetchone()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    OUT.mkdir(parents=True, exist_ok=True)
    pushes = OUT / "pushes.jsonl"
    pushes.write_text("")
    for old in (OUT / "pushes").glob("*.*"):
        old.unlink()
    day = demo_day()
    clock = [0]
    werss, deepseek = build_werss(day, clock), build_deepseek()

    def record(message: dict[str, Any]) -> None:
        with pushes.open("a", encoding="utf-8") as f:
            f.write(json.dumps(message, ensure_ascii=False) + "\n")

    sink = PushSink(on_message=record)
    werss_at, deepseek_at, sink_at = serve(werss.handle), serve(deepseek.handle), serve(sink.handle, PUSH_PORT)
    url = db.fresh_database(loader.load(use_airflow=False).database_url, DEMO_DB)
    secret = link_secret()
    os.environ.update(demo_environment(url, werss_at, deepseek_at, sink_at, secret, day))
    (OUT / "database_url").write_text(url)
    mcp_token = OUT / "mcp_token"  # the demo's owner token for `make mcp`, read by the printed command
    mcp_token.touch()
    mcp_token.chmod(0o600)
    mcp_token.write_text(secrets.token_urlsafe(32))
    with db.connect(url) as conn:  # a reader's focus, as the profile page saves it (focus.py)
        store.focus.save_profile(conn, DEMO_PROFILE, "demo")

    say = _quiet_airflow(OUT / "airflow.log")
    say(f"\n[demo] Opportunity Radar demo day {day} (Asia/Shanghai): sample data, recorded LLM answers, no network")
    earlier = seed_history(day, url)
    say(f"[demo] {history.CALLS} earlier calls of {history.ACCOUNT[1]} (demo data, two weeks back) measured on the "
        f"recorded prices before 07:00: {earlier.measured} horizon returns")
    say(f"[demo] task logs: {OUT / 'airflow.log'}\n")
    started = time.monotonic()
    run_slots(day, url, clock, sink, deepseek, say)
    html = save_report(day, url, secret)
    record_page = follow_later(day, url, secret, say)
    compared = evaluation_demo.show(url, day, record_later_time(day), OUT, say)
    counts = day_counts(url)
    say(f"\n[demo] done in {time.monotonic() - started:.0f}s: {counts['articles']} articles stored, "
        f"{counts['analyses']} analyses, {counts['excluded']} excluded by the reader's rules (no LLM call), "
        f"{counts['slots_ok']}/5 slots succeeded. Where to look:")
    say(f"  report (saved HTML copy):  {html}")
    say(f"  what was pushed:           {pushes}  ({len(sink.received)} messages: each push to {len(PUSH_FORMS)} channels,"
        f" {' / '.join(PUSH_FORMS)})")
    say(f"  each push in each form:    {OUT / 'pushes'}/  (0700.txt, 0700.md, 0700.html, …)")
    say(f"  track record (HTML copy):  {record_page}  (demo data: recorded prices, six weeks on)")
    say(f"  model evaluation (copy):   {compared}  (flash against v4-pro, recorded answers)")
    say(f"  report pages, live:        `make ui`, log in, open {UI_BASE}/daily/{day.isoformat()}")
    feed_copy, feed_live = save_feed(url, secret)
    say(f"  Atom feed (copy / live):   {feed_copy}  /  {feed_live}  (admin's token; rotate or revoke it on 关注)")
    say(f"  for an AI assistant (MCP): RADAR_DATABASE_URL=$(cat {OUT / 'database_url'}) "
        f"RADAR_MCP_OWNER_TOKEN=$(cat {OUT / 'mcp_token'}) RADAR_MCP_TOKEN=$(cat {OUT / 'mcp_token'}) make -s mcp"
        "  (the demo's owner token; docs/mcp.md)")
    plain = [m for m in sink.received if m.get("format", "text") == "text"]
    say(f"  pushed link (signed):      {plain[-1]['message'].splitlines()[-1] if plain else '-'}")
    return 0 if counts["slots_ok"] == 5 else 1


def seed_history(day: date, url: str) -> Any:
    """The sample account's earlier calls (history.py), on the recorded prices' first week as the demo replays
    them: its pushes quote their record."""
    from include.radar.market.recorded import recorded_source

    first = day - timedelta(days=day.weekday()) - (MARKET_WEEK - date(2026, 1, 19))
    return history.seed(url, first, day, UI_BASE, lambda: recorded_source(MARKET, 7 * market_shift_weeks(day)))


def date_pushes_at_slot(url: str, day: date, slot: str, at: datetime) -> int:
    """The demo replays its day's five slots at once, whenever `make run` is started: their pushes went out at
    the wall clock's time (a 07:00 push stamped 18:54), which would date the track record's picks then (and
    measure a 07:00 push from the next day's open). Stamp the slot's sent pushes ``at`` the time they would have
    gone out on the day (the slot's time plus what its run took), as a scheduled run would have. Demo only: a
    real slot sends at its time, and a late one really was read late."""
    with db.connect(url) as conn:
        return conn.execute(
            "UPDATE notification_log SET sent_at = %s WHERE report_date = %s AND slot = %s AND sent_at IS NOT NULL",
            (at, day, slot),
        ).rowcount


def follow_later(day: date, url: str, secret: str, say: Any) -> Path:
    """The track record as it will stand six weeks after the demo day: the real step (track_record.update) on
    the recorded prices, run with that later clock, and a copy of the record page. Demo data, said so."""
    later, run = record_later(day, url)
    with db.connect(url) as conn:
        picks = conn.execute(
            "SELECT count(*) AS n, count(*) FILTER (WHERE status = 'measurable') AS measurable FROM track_pick"
        ).fetchone()
    say(f"[demo] track record as of {later:%Y-%m-%d %H:%M} (recorded prices replayed on the demo's week, demo "
        f"data): {picks['n']} picks, {picks['measurable']} measurable, {run.measured} horizon returns measured, "
        f"{run.fetched} recorded answers read")
    return save_page("/record", f"record-{day.isoformat()}.html", url, secret, later)


def record_later(day: date, url: str) -> tuple[datetime, Any]:
    """The real step six weeks after the demo day, on the recorded prices. The record is taken up afresh from
    the stamped pushes (date_pushes_at_slot): the 22:00 slot's own step recorded the report's picks with the
    replay's wall clock, before that slot's push was stamped."""
    from include.radar.market.recorded import recorded_source
    from include.radar.report import track_record

    later = record_later_time(day)
    with db.connect(url) as conn:
        conn.execute("DELETE FROM track_pick")  # demo data only; their outcomes go with them
    run = track_record.update(lambda: db.connect(url),
                              lambda: recorded_source(MARKET, 7 * market_shift_weeks(day)), now=later)
    return later, run


def record_later_time(day: date) -> datetime:
    return datetime.combine(day + RECORD_LATER, datetime.min.time(), tzinfo=SHANGHAI).replace(hour=22, minute=30)


def _quiet_airflow(log_file: Path) -> Any:
    """Send everything written to stdout/stderr (Airflow's task logs) to ``log_file``; return a printer
    that still reaches the terminal."""
    terminal = os.dup(1)
    handle = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(handle, 1)
    os.dup2(handle, 2)

    def say(text: str) -> None:
        os.write(terminal, (text + "\n").encode("utf-8"))

    return say


def save_report(day: date, url: str, secret: str) -> Path:
    """Render the day's report page with the real web app and keep a copy."""
    return save_page(f"/daily/{day.isoformat()}", f"daily-{day.isoformat()}.html", url, secret)


def save_feed(url: str, secret: str) -> tuple[Path, str]:
    """A feed token for `make ui`'s Airflow user (admin), as the profile page makes it; the feed rendered by the
    real web app (a copy) and its live URL under `make ui`."""
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    from include.radar.web.routes.feed import token_sig

    with db.connect(url) as conn:
        key = store.feeds.rotate_token(conn, "admin", datetime.now(UTC))
    query = {"feed": key, "sig": token_sig(secret, key)}
    response = TestClient(create_app(db_url=url)).get("/feed.atom", params=query)
    target = OUT / "feed.atom"
    target.write_bytes(response.content)
    if response.status_code != 200:
        print(f"[demo] warning: /feed.atom answered HTTP {response.status_code}", file=sys.stderr)
    return target, f"{UI_BASE}/feed.atom?feed={key}&sig={query['sig']}"


def save_page(path: str, name: str, url: str, secret: str, now: datetime | None = None) -> Path:
    """Render one page with the real web app (a signed link opens a read session) and keep a copy."""
    from fastapi.testclient import TestClient

    from include.radar.core import signing
    from include.radar.web.app import create_app

    app = create_app(db_url=url, clock=FixedClock(now) if now else None)
    response = TestClient(app).get(path, params=signing.sign(path, secret, now or datetime.now(UTC), 1))
    target = OUT / name
    target.write_text(response.text, encoding="utf-8")
    if response.status_code != 200:
        print(f"[demo] warning: {path} answered HTTP {response.status_code}", file=sys.stderr)
    return target


if __name__ == "__main__":
    sys.exit(main())
