"""make bench-rules: what the reader's catastrophic /regex/ rules cost, before (Python's re) and now (RE2).

For each rule of include/radar_demo/hostile_rules.py (nested quantifiers, alternation under a star,
backreferences, lookarounds, state explosions, 200-character rules):

- **before**: Python's ``re``, a backtracking engine, searching the worst of the texts, in a child
  process killed after ``--before-limit`` seconds (``>2 s`` means it was still running:
  ``!/(a+)+$/`` over 41 characters runs for hours);
- **save**: what saving it on the profile page now costs beyond the database write: parsing, RE2's compile and
  the cost probes (``Profile.build(measure=True)``), and the verdict: accepted, or refused with the reason;
- **select**: for an accepted rule, the exclusion check of a slot's 50 articles of 30,000 characters each (the
  worst text of the set, ten times each), as select_articles runs it.

- **profiles**: whole profiles saved at once (the audit's 19 gated rules, 100 sensible ones, 100 that RE2
  compiles slowly, 100 that each cost ~3 ms a probe): a save is bounded by regex_rules.SAVE_SECONDS;
- **stored**: the audit's rules stored before the probes saw them (a slot does not measure again): how many of
  50 crafted articles a slot's selection checks within its budget (select_articles.RULES_SECONDS);
- **twenty unread**: twenty rules the probes once missed ((?U), \\Q\\E, a fifth alternative), ~45 ms each, stored:
  what the first crafted article costs, how many the slot switches off on it, what the next articles cost.

Goal: every save and every selection well under a second. Prints a table and the worst figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import sys
import time
from pathlib import Path

from include.radar.analysis import focus
from include.radar_demo.hostile_rules import CATASTROPHIC_RULES, GATED_NINETEEN, UNREAD_TWENTY, texts

REPO = Path(__file__).resolve().parents[1]

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
    worst_save = max(worst_save, profiles(corpus))
    print(f"\n[bench-rules] worst save {worst_save:.1f} ms, worst selection of {ARTICLES} articles "
          f"{worst_select:.1f} ms (goal: well under 1000 ms each)")
    stored(corpus)
    twenty_unread(corpus)
    return 0


def profiles(corpus: dict[str, str]) -> float:
    """Whole profiles saved at once: what a save costs with many rules. Returns the worst save in ms."""
    print(f"\n{'profile':62} {'save ms':>8}  verdict")
    worst = 0.0
    for name, rules in (
        ("the audit's 19 gated rules together", [f"!/{body}/" for body in GATED_NINETEEN]),
        ("100 sensible regex rules", [f"!/词{i}.{{0,8}}(订单|中标)/" for i in range(100)]),
        ("100 rules RE2 compiles slowly (\\pL{999}\\pN{9xx})", [f"!/\\pL{{999}}\\pN{{9{i:02d}}}/" for i in range(100)]),
        ("100 rules each ~3 ms a probe ([ab]*a[ab]{n}c)", [f"!/[ab]*a[ab]{{{n}}}c{n}/" for n in range(10, 110)]),
    ):
        started = time.perf_counter()
        try:
            focus.Profile.build(rules=rules, measure=True)
            verdict = "accepted"
        except focus.ProfileError as exc:
            verdict = "refused: " + exc.errors[-1].split("：", 1)[-1][:60]
        ms = (time.perf_counter() - started) * 1000
        worst = max(worst, ms)
        print(f"{name:62} {ms:8.1f}  {verdict}")
    return worst


def stored(corpus: dict[str, str]) -> None:
    """The audit's rules as a profile stored before the save measured them this way (a slot does not measure
    again): a slot's selection of 50 crafted articles stops at its budget, the rest wait for the next slot."""
    from include.radar.analysis import regex_rules
    from include.radar.steps.select_articles import RULES_SECONDS

    profile = focus.Profile.build(rules=["!/(a+)+$/", *(f"!/{b}/" for _, b in CATASTROPHIC_RULES
                                                        if b.startswith(("K", "公司"))),
                                         *(f"!/{b}/" for b in GATED_NINETEEN)])
    text = corpus["a literal, then two letters"][:-20] + "\n订单同比增长。"  # ends as an article ends, not in a+
    budget = regex_rules.Budget(RULES_SECONDS)
    started, checked = time.perf_counter(), 0
    for _ in range(ARTICLES):
        try:
            profile.exclusion("标题", text, budget)
        except regex_rules.OutOfTime:
            break
        checked += 1
    took = time.perf_counter() - started
    per = took / max(1, checked) * 1000
    print(f"[bench-rules] stored before the probes saw them, {len(profile.rules)} rules: a slot's selection of "
          f"{ARTICLES} crafted articles checked {checked} in {took:.1f} s (~{per:.0f} ms each; budget "
          f"{RULES_SECONDS:g} s), {ARTICLES - checked} wait for the next slot")


def twenty_unread(corpus: dict[str, str]) -> None:
    """UNREAD_TWENTY stored: each crafted article checked as select_articles checks it (the rules a Budget finds
    too slow switched off after the article), in CPU time: the first article, then the next four."""
    from include.radar.analysis import regex_rules

    profile = focus.Profile.build(rules=[f"!/{body}/" for body in UNREAD_TWENTY])
    saved = sum(1 for body in UNREAD_TWENTY if not regex_rules.cost_errors([body]))
    text = corpus["a literal, then two letters"]
    budget = regex_rules.Budget(60.0)
    articles = []
    for _ in range(5):
        started = time.thread_time()
        profile.exclusion("标题", text, budget)
        took = (time.thread_time() - started) * 1000
        found, budget.slow, budget.totals = budget.slow, {}, {}
        articles.append(f"{took:.0f} ms, {len(found)} off")
        profile = profile.switched_off({rule: "slow" for rule in found})
    print(f"[bench-rules] twenty rules the probes once missed: {saved} of 20 pass a save now; stored, five crafted "
          f"articles in a slot (CPU; switched off past {regex_rules.SLOT_RULE_MS:g} ms a rule or "
          f"{regex_rules.SLOT_ARTICLE_MS:g} ms all together): {' · '.join(articles)}; "
          f"{len(profile.rules)} rules left")


if __name__ == "__main__":
    sys.exit(main())
