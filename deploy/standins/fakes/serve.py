"""The offline stand-ins for WeRSS, DeepSeek and the push channel (include/radar_demo/fakes.py), each served
in a container of its own by `make compose-day` (deploy/standins/docker-compose.standins.yaml).

    python serve.py werss|deepseek|push

WeRSS serves the demo's accounts and articles, placed around the day's slots (STANDIN_SLOTS: the epoch seconds
of the first two, comma separated): the demo's earlier articles before the first slot, those of its
evening between the first and the second; its collection task runs on STANDIN_COLLECTION_CRON. DeepSeek answers with the demo's recorded answers after
STANDIN_LLM_SECONDS. The push sink records what reaches /push (the reader's) and /ops (the operator's).
Each answers GET /_standin/stats with what it counted (read by the make target through `docker compose exec`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from include.radar_demo import run as demo
from include.radar_demo.fakes import FakeArticle, FakeWeRSS, PushSink, collection_task


def werss() -> tuple[Any, dict[str, Any]]:
    first, second = (int(s) for s in os.environ["STANDIN_SLOTS"].split(","))
    rows = sorted(demo.load("articles.json"), key=lambda a: a["publish_offset_minutes"])
    evening = [a for a in rows if a["publish_offset_minutes"] >= 0]
    articles = []
    for a in rows:
        if a["publish_offset_minutes"] < 0:  # yesterday's and before: minutes before the first slot
            published = first - 120 + 60 * a["publish_offset_minutes"]
        else:  # the day's: spread between the two slots
            published = first + 120 + (second - first - 240) * evening.index(a) // max(1, len(evening) - 1)
        html = a["content_html"] or a.get("late_content_html", "")
        articles.append(FakeArticle(id=a["id"], mp_id=a["mp_id"], title=a["title"], url=a["url"],
                                    description=a.get("description", ""), publish_time=published,
                                    content_html=html, content=a.get("content") if not html else None))
    fake = FakeWeRSS(accounts=demo.load("accounts.json"), articles=articles,
                     username=os.environ.get("USERNAME", "admin"), password=os.environ["PASSWORD"],
                     message_tasks=[collection_task(os.environ["STANDIN_COLLECTION_CRON"])], scheduler_running=True)
    fake.apply()  # the task applied (「应用」) and run by WeRSS's scheduler, as after the guide's step 8
    return fake, {"port": 8001, "stats": lambda: {
        "detail_calls": sum(fake.detail_calls.values()), "articles_fetched": len(fake.detail_calls),
        "most_fetches_of_one": max(fake.detail_calls.values(), default=0), "logins": fake.login_attempts,
        "failed_logins": fake.failed_logins}}


def deepseek() -> tuple[Any, dict[str, Any]]:
    fake = demo.build_deepseek()
    fake.api_key = os.environ["STANDIN_DEEPSEEK_KEY"]
    recorded = fake.responder
    delay = float(os.environ.get("STANDIN_LLM_SECONDS", "0"))

    def slow(body: dict[str, Any]) -> str:
        time.sleep(delay)
        return recorded(body)

    fake.responder = slow

    def stats() -> dict[str, Any]:
        asked = [next((line[3:] for line in u.splitlines() if line.startswith("标题：")), "digest")
                 for u in fake.user_messages()]
        return {"calls": len(asked), "articles": len(set(asked) - {"digest"}),
                "digests": asked.count("digest"),
                "most_calls_of_one": max((asked.count(t) for t in set(asked) - {"digest"}), default=0)}

    return fake, {"port": 8000, "stats": stats}


def push() -> tuple[Any, dict[str, Any]]:
    sink = PushSink()

    def handle(request: Request) -> Response:
        response = sink.handle(request)
        if sink.received and "_channel" not in sink.received[-1]:
            sink.received[-1]["_channel"] = request.path.strip("/")
        return response

    def stats() -> dict[str, Any]:
        return {"reader": [m.get("title", "") for m in sink.received if m["_channel"] == "push"],
                "ops": [m.get("title", "") for m in sink.received if m["_channel"] == "ops"],
                "last_reader_message": next((m.get("message", "") for m in reversed(sink.received)
                                             if m["_channel"] == "push"), "")}

    return type("Sink", (), {"handle": staticmethod(handle)}), {"port": 8000, "stats": stats}


def main(kind: str) -> None:
    fake, info = {"werss": werss, "deepseek": deepseek, "push": push}[kind]()

    def app(request: Request) -> Response:
        if request.path == "/_standin/stats":
            return Response(json.dumps(info["stats"](), ensure_ascii=False), content_type="application/json")
        return fake.handle(request)

    server = make_server("0.0.0.0", info["port"], Request.application(app), threaded=True)
    print(f"{kind} stand-in on :{info['port']}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
