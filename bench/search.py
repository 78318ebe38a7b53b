"""Which Chinese search finds more on the labelled articles (tests/data/event_articles.json, 91 articles)?

Queries are every entity the labels name (companies, products, programmes) plus sector words; an article is
relevant to a query when its title or text contains the query (case-insensitive). Three ways are compared,
each in PostgreSQL on a scratch database:

- **shipped**: jieba search-mode words plus adjacent Chinese character pairs, a query cut with the frequent
  words of jieba's dictionary, its long words matched whole or through their pairs, the characters no word
  covers through their pairs (include/radar/core/search.py);
- **full dict**: the same, the query cut with jieba's full dictionary (70 MB more in the api-server);
- **jieba only**: the same words without the character pairs;
- **substring** (``ILIKE '%q%'``, what a pg_trgm index accelerates): relevant by definition, shown for its
  time and because pg_trgm is missing from the embedded PostgreSQL and cannot index two-character words.

    RADAR_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python -m bench.search
"""

from __future__ import annotations

import ast
import json
import os
import time
import uuid
from pathlib import Path

import psycopg

from include.radar.core import db, search

REPO = Path(__file__).resolve().parents[1]

SECTOR_WORDS = ["储能", "光伏", "回购", "锂电", "半导体", "降准", "CPI", "PPI", "出口", "订单", "并购", "新能源汽车"]


def jieba_only(title: str, text: str) -> list[str]:
    return sorted(set(search.words(f"{title}\n{text[:search.WORD_CHARS]}")) | set(search._ALNUM_RUN.findall(
        f"{title}\n{text}".lower())))


def jieba_only_query(q: str) -> str:
    terms = [w for w in dict.fromkeys(search.words(q.lower(), search_mode=False)) if w not in search._EXCHANGES]
    return " & ".join(search._quote(t) for t in terms)


def cutter_memory() -> tuple[float, float, object]:
    """MB the shipped query cutter and jieba's full dictionary each add to a process (unique set size), and
    the full one, for the comparison."""
    import jieba
    import psutil

    def uss() -> float:
        return psutil.Process().memory_full_info().uss / 2**20

    before = uss()
    search._query_cutter()
    small = uss() - before
    before = uss()
    full = jieba.Tokenizer()
    full.initialize()
    return small, uss() - before, full


def main() -> int:
    data = json.loads((REPO / "tests" / "data" / "event_articles.json").read_text(encoding="utf-8"))["articles"]
    entities: set[str] = set()
    for a in data:
        raw = a.get("entities") or "[]"
        entities.update(e for e in (ast.literal_eval(raw) if isinstance(raw, str) else raw) if 2 <= len(e) <= 12)
    queries = sorted(entities) + SECTOR_WORDS
    small, full_mb, full = cutter_memory()
    server = os.environ.get("RADAR_TEST_DATABASE_URL") or db.embedded_url(REPO / ".local" / "pgdata-bench")
    name = f"radar_search_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(server)
    info["dbname"] = name
    try:
        with psycopg.connect(psycopg.conninfo.make_conninfo(**info), autocommit=True) as conn:
            conn.execute("CREATE TABLE doc (id int PRIMARY KEY, body text, shipped tsvector, words tsvector)")
            for i, a in enumerate(data):
                conn.execute("INSERT INTO doc VALUES (%s, %s, array_to_tsvector(%s::text[]), array_to_tsvector(%s::text[]))",
                             (i, f"{a['title']}\n{a['text']}", search.lexemes(a["title"], a["text"]),
                              jieba_only(a["title"], a["text"])))
            trgm = bool(conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone())
            results = {"shipped": [0, 0, 0.0], "full dict": [0, 0, 0.0], "jieba only": [0, 0, 0.0],
                       "substring": [0, 0, 0.0]}
            relevant_total = 0
            misses: list[str] = []
            for q in queries:
                truth = {r[0] for r in conn.execute("SELECT id FROM doc WHERE strpos(lower(body), lower(%s)) > 0", (q,))}
                relevant_total += len(truth)
                for method, sql, param in (
                    ("shipped", "SELECT id FROM doc WHERE shipped @@ %s::tsquery", search.query(q)[0]),
                    ("full dict", "SELECT id FROM doc WHERE shipped @@ %s::tsquery", search.query(q, cutter=full)[0]),
                    ("jieba only", "SELECT id FROM doc WHERE words @@ %s::tsquery", jieba_only_query(q)),
                    ("substring", "SELECT id FROM doc WHERE body ILIKE '%%' || %s || '%%'", q),
                ):
                    t0 = time.perf_counter()
                    found = {r[0] for r in conn.execute(sql, (param,))} if param else set()
                    results[method][2] += time.perf_counter() - t0
                    results[method][0] += len(found & truth)
                    results[method][1] += len(found)
                    if method == "shipped" and truth - found:
                        misses.append(f"{q} ({len(truth - found)})")
            print(f"{len(data)} articles, {len(queries)} queries, {relevant_total} relevant (query, article) pairs "
                  f"(an article is relevant when it contains the query)\n")
            print(f"{'method':<12} {'recall':>7} {'precision':>10} {'found':>6}")
            for method, (hit, found, _) in results.items():
                print(f"{method:<12} {hit / relevant_total:>7.3f} {hit / found if found else 1:>10.3f} {found:>6}")
            print(f"\nshipped misses: {', '.join(misses) or 'none'}")
            print(f"the query cutter's memory (what a search adds to the api-server, per worker): shipped "
                  f"(words used at least {search.QUERY_MIN_FREQ} times) {small:.0f} MB, jieba's full dictionary "
                  f"{full_mb:.0f} MB")
            print(f"pg_trgm on this server: {'available' if trgm else 'missing'}"
                  " (the embedded PostgreSQL has none; a trigram index cannot serve two-character queries)")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
