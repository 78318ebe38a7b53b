"""make bench-rules: what the reader's catastrophic /regex/ rules cost, before (Python's re) and now (RE2).

For each rule of include/radar_demo/hostile_rules.py (nested quantifiers, alternation under a star,
backreferences, lookarounds, state explosions, 200-character rules):

- **before**: Python's ``re`` (what focus.py ran until issue 24) searching the worst of the texts, in a child
  process killed after ``--before-limit`` seconds (``>2 s`` means it was still running: the issue's
  ``!/(a+)+$/`` over 41 characters runs for hours);
- **save**: what saving it on the profile page now costs beyond the database write: parsing, RE2's compile and
  the cost probes (``Profile.build(measure=True)``), and the verdict: accepted, or refused with the reason;
- **select**: for an accepted rule, the exclusion check of a slot's 50 articles of 30,000 characters each (the
  worst text of the set, ten times each), as select_articles runs it.

Goal (issue 24 §1): every save and every selection well under a second. Prints a table and the worst figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from include.radar import focus  # noqa: E402
from include.radar_demo.hostile_rules import CATASTROPHIC_RULES, texts  # noqa: E402

ARTICLES = 50


def _python_re(body: str, text: str) -> None:
    try:
        re.compile(body, re.IGNORECASE).search(text)
    except re.error:
        pass


def before(body: str, corpus: dict[str, str], limit: float) -> str:
    """Python's re over each text in a child process; the worst time, or '>limit' when it had to be killed."""
    worst = 0.0
    for text in corpus.values():
        child = multiprocessing.Process(target=_python_re, args=(body, text))
        started = time.perf_counter()
        child.start()
        child.join(limit)
        if child.is_alive():
            child.kill()
            child.join()
            return f">{limit:g} s"
        worst = max(worst, time.perf_counter() - started)
    return f"{worst * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-limit", type=float, default=2.0, help="seconds Python's re may run per text")
    args = parser.parse_args()
    corpus = texts()
    print(f"[bench-rules] {len(CATASTROPHIC_RULES)} rules; texts: " + ", ".join(
        f"{name} ({len(t):,} chars)" for name, t in corpus.items()))
    print(f"{'family':26} {'rule':34} {'before (re)':>12} {'save ms':>8} {'select ms':>9}  verdict")
    worst_save = worst_select = 0.0
    for family, body in CATASTROPHIC_RULES:
        line = f"!/{body}/"
        started = time.perf_counter()
        try:
            profile = focus.Profile.build(rules=[line], measure=True)
            verdict = "accepted"
        except focus.ProfileError as exc:
            profile, verdict = None, "refused: " + exc.errors[0].split("：", 1)[-1][:60]
        save_ms = (time.perf_counter() - started) * 1000
        select_ms = float("nan")
        if profile is not None:
            started = time.perf_counter()
            for i in range(ARTICLES):
                text = list(corpus.values())[i % len(corpus)]
                profile.exclusion("标题", text)
            select_ms = (time.perf_counter() - started) * 1000
            worst_select = max(worst_select, select_ms)
        worst_save = max(worst_save, save_ms)
        shown = body if len(body) <= 32 else body[:29] + "…"
        print(f"{family:26} {shown:34} {before(body, corpus, args.before_limit):>12} {save_ms:8.1f} "
              f"{select_ms:9.1f}  {verdict}")
    print(f"\n[bench-rules] worst save {worst_save:.1f} ms, worst selection of {ARTICLES} articles "
          f"{worst_select:.1f} ms (goal: well under 1000 ms each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
