"""How well and how fast articles are grouped into real-world events. Prints figures; asserts nothing.

On the labelled Chinese articles in tests/data/event_articles.json (same event / different events, hard
negatives included, and cross-day rewrites: another account, one hour to three days later, in other words) it
prints pairwise precision and recall, and the recall of the rewrites alone, of:
- the shipped rule (events.py: TF-IDF cosine of character 2/3-grams, plus the figures and the model's entities
  two articles share), the same without figures, without entities, and TF-IDF alone,
- character 3-shingle Jaccard, the quantity MinHash (e.g. datasketch) estimates, at its best threshold,
and a threshold sweep around the shipped values. Then it times grouping one day of 500 articles.

Usage: make bench-grouping   (or: python -m bench.grouping [--articles 500])
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy

from include.radar.pushes import events

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "event_articles.json"


def load() -> tuple[list[events.Doc], dict[int, str]]:
    articles = json.loads(DATA.read_text(encoding="utf-8"))["articles"]
    docs, labels = [], {}
    for i, a in enumerate(articles):
        docs.append(events.Doc(key=i, account=a["account"], published_at=datetime.fromisoformat(a["published_at"]),
                               title=a["title"], text=a["text"], entities=events.entity_keys(a["entities"])))
        labels[i] = a["event"]
    return docs, labels


def rewrites() -> set[int]:
    """The keys of the labelled cross-day rewrites: another account, one hour to three days later, other words."""
    articles = json.loads(DATA.read_text(encoding="utf-8"))["articles"]
    return {i for i, a in enumerate(articles) if a.get("rewrite")}


def rewrite_recall(matches: dict[int, events.Match], labels: dict[int, str], keys: set[int]) -> float:
    """Of the rewrites, the share grouped with the earlier articles of their event (pairwise)."""
    event = {k: m.event for k, m in matches.items()}
    pairs = [(r, o) for r in keys for o in labels if o != r and o not in keys and labels[o] == labels[r]]
    return sum(event[r] == event[o] for r, o in pairs) / len(pairs) if pairs else 1.0


def scores(matches: dict[int, events.Match], docs: list[events.Doc], labels: dict[int, str]) -> tuple[float, float]:
    """Pairwise precision and recall of the grouping against the labels."""
    event = {k: m.event for k, m in matches.items()}
    tp = fp = fn = 0
    for a, b in itertools.combinations([d.key for d in docs], 2):
        same_label, same_group = labels[a] == labels[b], event[a] == event[b]
        tp += same_label and same_group
        fp += same_group and not same_label
        fn += same_label and not same_group
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def jaccard_matrix(docs: list[events.Doc], n: int = 3) -> numpy.ndarray:
    texts = events.comparable_texts(docs)
    sets = [{t[i:i + n] for i in range(len(t) - n + 1)} for t in texts]
    out = numpy.zeros((len(docs), len(docs)))
    for i, j in itertools.combinations(range(len(docs)), 2):
        union = len(sets[i] | sets[j])
        out[i, j] = out[j, i] = len(sets[i] & sets[j]) / union if union else 0.0
    return out


def synthetic_day(docs: list[events.Doc], count: int, seed: int = 7) -> list[events.Doc]:
    """``count`` articles published on one day: the labelled ones, then variants of them (paragraphs dropped
    and reordered, other accounts) so that the text differs as rewrites do."""
    rng = random.Random(seed)
    day = datetime(2026, 11, 20, 0, 0, tzinfo=docs[0].published_at.tzinfo)
    out = []
    for i in range(count):
        base = docs[i % len(docs)]
        paragraphs = [p for p in base.text.splitlines() if p.strip()]
        if i >= len(docs) and len(paragraphs) > 1:
            rng.shuffle(paragraphs)
            paragraphs = paragraphs[: max(1, len(paragraphs) - 1)]
        out.append(events.Doc(key=i, account=f"{base.account}-{i // len(docs)}",
                              published_at=day + timedelta(minutes=rng.randrange(24 * 60)),
                              title=base.title, text="\n".join(paragraphs), entities=base.entities))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--articles", type=int, default=500, help="articles in the timed day (default 500)")
    args = parser.parse_args()

    docs, labels = load()
    sizes = sorted((sum(1 for v in labels.values() if v == e) for e in set(labels.values())), reverse=True)
    positives = sum(s * (s - 1) // 2 for s in sizes)
    print(f"labelled set: {len(docs)} articles, {len(set(labels.values()))} events, "
          f"{positives} same-event pairs of {len(docs) * (len(docs) - 1) // 2}")

    tfidf = events.similarities(docs)
    rule = events.Rule()
    rewritten = rewrites()
    print(f"\n{'method':<60} {'precision':>9} {'recall':>7} {'rewrites':>9}")
    rows = [
        ("shipped: TF-IDF char 2/3-grams + shared figures + entities", tfidf, rule),
        (f"the same without one entity and two figures at ≥ {events.ENTITY_FIGURES_SIM}", tfidf,
         events.Rule(entity_figures_sim=None)),
        ("TF-IDF + shared figures (no model entities)", tfidf, events.Rule(use_entities=False)),
        ("TF-IDF + model entities (no figures)", tfidf, events.Rule(use_figures=False)),
        (f"TF-IDF alone ≥ {rule.same}", tfidf, events.Rule(use_figures=False, use_entities=False)),
    ]
    for label, sims, r in rows:
        matches = events.group(docs, sims, r)
        p, rec = scores(matches, docs, labels)
        print(f"{label:<60} {p:>9.3f} {rec:>7.3f} {rewrite_recall(matches, labels, rewritten):>9.3f}")
    jac = jaccard_matrix(docs)
    for label, make in [
        ("3-shingle Jaccard alone (what MinHash estimates), best ≥ {t:.2f}",
         lambda t: events.Rule(same=t, use_figures=False, use_entities=False)),
        ("3-shingle Jaccard, figures and entities, best ≥ {t:.2f}",
         lambda t: events.Rule(same=4 * t, figures_sim=t / 2, figure_entity_sim=t, related=2 * t)),
    ]:
        t, p, rec = max(((t, *scores(events.group(docs, jac, make(t)), docs, labels)) for t in numpy.arange(0.01, 0.41, 0.01)),
                        key=lambda x: 2 * x[1] * x[2] / (x[1] + x[2] or 1))
        print(f"{label.format(t=t):<60} {p:>9.3f} {rec:>7.3f}")

    print("\nthreshold sweep of the shipped rule, TF-IDF floor with two shared figures × with one figure and one "
          "entity (precision / recall):")
    entity_floors = [0.03, 0.05, 0.08, 0.12]
    print("  " + " " * 14 + "".join(f"{f:>13.2f}" for f in entity_floors))
    for figures_sim in (0.05, 0.08, 0.10, 0.12, 0.15):
        cells = []
        for floor in entity_floors:
            p, rec = scores(events.group(docs, tfidf, events.Rule(figures_sim=figures_sim, figure_entity_sim=floor)),
                            docs, labels)
            cells.append(f"{p:.2f} / {rec:.2f}")
        print(f"  {figures_sim:>12.2f}  " + "".join(f"{c:>13}" for c in cells))

    day = synthetic_day(docs, args.articles)
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        matches = events.group(day)
        timings.append(time.perf_counter() - started)
    print(f"\none day of {len(day)} articles: grouped in {min(timings):.2f} s (best of 3; "
          f"{len(set(m.event for m in matches.values()))} events)")


if __name__ == "__main__":
    main()
