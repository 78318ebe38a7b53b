"""The reader's ``/regex/`` filter rules, run in time linear in the text whatever the reader types. Pure.

A rule is typed on the profile page by whoever may edit it and then runs over every article's title and up to
30,000 characters of text: in the slot's ``select_articles`` and, before this module, inside the api-server's
request. Python's ``re`` backtracks, so ``/(a+)+$/`` over ``"a" * 40 + "!"`` ran for hours with the GIL held.
Here a rule is compiled by **RE2** (google-re2), whose automata never backtrack, and matched as a one-pattern
``re2.Set``: a match/no-match answer from RE2's DFA alone, without the submatch pass (``re2.search`` would run
RE2's NFA over the whole match to place its groups: ``(.*){30}`` took 258 ms there, 0.2 ms here), with the
GIL released while it runs.

Linear is not yet cheap: a pattern whose DFA has exponentially many states (``[ab]*a[ab]{100}c``) keeps RE2
rebuilding its state cache and costs up to ~200 ms per 30,000 characters (``scripts/bench_rules.py``). So a
rule is also **measured when it is saved**: run over probe texts built to drive an automaton into its costly
states (one letter repeated, random text over two letters, over the rule's own characters, over a mixed
alphabet), it must stay under :data:`RULE_PROBE_MS`, and all regex rules of a profile together under
:data:`PROFILE_PROBE_MS`, else the form refuses it and says which rule and why. A sensible rule costs about
0.1 ms per probe (most of it the text's UTF-8 encoding, done once per article and shared by the rules).

What RE2 cannot take is refused with the reason in the reader's language: lookarounds, backreferences, a
repetition over 1000, a program too large for RE2's memory budget.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from functools import cache, lru_cache

import re2

PROBE_CHARS = 30_000  # the length of text a rule runs over (focus.MATCH_CHARS plus a title)
RULE_PROBE_MS = 5.0  # one rule's worst probe; a sensible rule costs ~0.1 ms, a pathological one 10-200 ms
PROFILE_PROBE_MS = 20.0  # every regex rule of a profile together, on the worst probe: a slot's 50 articles ≤ 1 s
RE2_MAX_MEM = 8 << 20  # RE2's budget per compiled rule (program and DFA cache): a rule too large is refused


class RuleRefused(ValueError):
    """A regex the radar will not run; the message is for the reader (Chinese) and names the rule."""


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False  # rules match case-insensitively, like the plain-word rules
    options.log_errors = False  # RE2 would print every refused pattern to the api-server's stderr
    options.max_mem = RE2_MAX_MEM
    return options


_REASONS = (
    (re.compile(r"invalid perl operator: \(\?<?[=!]"), "不支持环视（(?=…)、(?!…)、(?<=…)、(?<!…)）"),
    (re.compile(r"invalid escape sequence: \\[1-9]"), "不支持反向引用（\\1 等）"),
    (re.compile(r"invalid named capture group|invalid perl operator: \(\?P?<"), "不支持这种命名分组写法"),
    (re.compile(r"invalid repetition size"), "重复次数超过上限 1000"),
    (re.compile(r"bad repetition operator"), "重复写法无效（如 ** 或 {2}{3}）"),
    (re.compile(r"pattern too large"), "规则过于复杂，超出匹配引擎的内存上限"),
)


def _refusal(body: str, error: Exception) -> RuleRefused:
    message = error.args[0] if error.args else str(error)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    for pattern, reason in _REASONS:
        if pattern.search(str(message)):
            return RuleRefused(f"正则「/{body}/」无法使用：{reason}")
    return RuleRefused(f"正则「/{body}/」无效：{message}")


@lru_cache(maxsize=1024)
def compile_rule(body: str) -> Callable[[bytes], bool]:
    """The matcher of ``/body/``: takes the UTF-8 bytes of a text, says whether the rule hits it.

    Raises :class:`RuleRefused` when RE2 cannot take it. Cached per pattern: the profile is loaded by every
    slot and page, a rule is compiled once per process.
    """
    options = _options()
    try:
        re2.compile(body, options)  # RE2's own reason when it refuses (a Set only says "failed to add")
        matcher = re2.Set.SearchSet(options)
        matcher.Add(body)
        matcher.Compile()
    except Exception as exc:  # noqa: BLE001 - re2.error, or a compile that ran out of memory
        raise _refusal(body, exc) from None
    match = matcher.Match

    def hits(text: bytes) -> bool:
        return bool(match(text))

    return hits


def _random_text(alphabet: str, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(PROBE_CHARS))


@cache
def _fixed_probes() -> tuple[bytes, ...]:
    mixed = "abcdefxyz0123456789 \n.,;:!?-_/()[]{}储能光伏芯片半导体公司订单增长，。、：；“”（）"
    return tuple(t.encode() for t in ("a" * (PROBE_CHARS - 1) + "!", _random_text("ab", 1), _random_text(mixed, 2)))


_GROUP = re.compile(r"\[\^?((?:\\.|[^\]])*)\]|\(((?:\\.|[^()])*)\)")


def _alphabet(text: str) -> str:
    return "".join(sorted({c for c in text if c.isalnum() or ord(c) > 127}))


def _own_probes(body: str) -> list[bytes]:
    """Random text over the rule's own characters, and over the characters of each of its classes and groups:
    what drives *its* automaton into costly states (``[储能]*储[储能]{100}Z`` is cheap on Latin text and on
    text where Z breaks the runs, and costly on text made of 储 and 能 only)."""
    alphabets = [_alphabet(body)]
    for match in _GROUP.finditer(body):
        alphabets.append(_alphabet(match.group(1) or match.group(2) or ""))
    probes = []
    for seed, alphabet in enumerate(dict.fromkeys(a[:64] for a in alphabets if a), start=3):
        probes.append(_random_text(alphabet, seed).encode())
        if len(probes) == 4:
            break
    return probes


def _probe_ms(hits: Callable[[bytes], bool], probes: Iterable[bytes]) -> float:
    """The rule's worst time over the probes (the better of two runs of a probe, so that a busy machine's
    hiccup does not refuse a sensible rule)."""
    worst = 0.0
    for probe in probes:
        best = float("inf")
        for _ in range(2):
            started = time.perf_counter()
            hits(probe)
            best = min(best, time.perf_counter() - started)
            if best * 1000 <= RULE_PROBE_MS or best * 1000 > 3 * RULE_PROBE_MS:
                break  # under the limit, or far over it: no second run needed
        worst = max(worst, best)
    return worst * 1000


def cost_errors(bodies: Iterable[str]) -> list[str]:
    """Why these regex rules (their bodies, without the slashes) are too costly to run on every article;
    empty when they are fine. Stops measuring once the profile is over budget, so a save answers in well
    under a second whatever was typed."""
    errors: list[str] = []
    total = 0.0
    for body in dict.fromkeys(bodies):
        try:
            hits = compile_rule(body)
        except RuleRefused:
            continue  # reported where it was parsed
        ms = _probe_ms(hits, (*_fixed_probes(), *_own_probes(body)))
        total += ms
        if ms > RULE_PROBE_MS:
            errors.append(f"正则「/{body}/」在长文上匹配太慢（约 {ms:.0f} 毫秒/篇，上限 {RULE_PROBE_MS:.0f}），"
                          "请去掉嵌套或大范围的重复，如 (a|b)*a(a|b){100}")
        elif total > PROFILE_PROBE_MS:
            errors.append(f"正则规则合计在长文上匹配太慢（超过 {PROFILE_PROBE_MS:.0f} 毫秒/篇），请减少或简化正则规则")
        if total > PROFILE_PROBE_MS:
            break
    return errors
