"""The reader's ``/regex/`` filter rules, run in time linear in the text whatever the reader types. Pure.

A rule runs over every article's title and text, so it is compiled by RE2 (automata that never backtrack) and
matched as a one-pattern ``re2.Set``: a yes/no from RE2's DFA alone, without the submatch pass, the GIL released.
Linear is not cheap: a DFA with exponentially many states keeps rebuilding its cache. So a rule is measured when
it is saved, over probes built to open its gates and drive its automaton into costly states (regex_probes.py),
and refused over the limits below; a stored rule is not measured again (a busy machine must not drop it): a
slot times each rule instead (:class:`Budget`) and switches off one too slow on one article, and the dearest
when all together are too slow on one. What RE2 cannot take is refused with the reason. The rules: docs/readers-radar.md; the figures: docs/benchmarks.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

import re2

from include.radar.core.clock import SYSTEM, Clock

RULE_PROBE_MS = 5.0  # one rule's worst probe; a sensible rule costs ~0.1 ms, a pathological one 10-200 ms
PROFILE_PROBE_MS = 20.0  # every regex rule of a profile together, on the worst probe: a slot's 50 articles ≤ 1 s
RE2_MAX_MEM = 8 << 20  # RE2's budget per compiled rule (program and DFA cache): a rule too large is refused
SHORT_BYTES = 1_000  # each probe is first run over this much of itself, its cost extrapolated to the whole,
GROWTH = 4  # then over four times as much, and so on up to the whole probe (_probe_ms)
SAVE_SECONDS = 0.6  # a save's compiling and measuring of every regex rule together: then it answers, refusing
# one rule on one article in a slot (this thread's CPU time): past it the slot switches the rule off for good.
# Ten times what a save allows a probe: only text no probe foresaw gets there, and a profile of such rules
# would otherwise spend the slot's whole budget on every article
SLOT_RULE_MS = 50.0
# every regex rule on one article in a slot, together (CPU): past it the rules dearest on that article are
# switched off until the others are within it. Twenty rules each just under SLOT_RULE_MS cost a second an
# article otherwise, and only those that crossed it by chance were switched off
SLOT_ARTICLE_MS = 100.0


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
    except Exception as exc:  # re2.error, or a compile that ran out of memory
        raise _refusal(body, exc) from None
    match = matcher.Match

    def hits(text: bytes) -> bool:
        return bool(match(text))

    return hits


# ---------------------------------------------------------------------------------------------- measuring


class OutOfTime(RuntimeError):
    """A :class:`Budget` ran out before the regex rules were applied to everything."""


class Budget:
    """An allowance of seconds on ``clock``'s monotonic counter, counted from its creation. What a rule's run
    costs is counted on the clock's ``cpu``: the CPU time of this thread (RE2 runs in it, the GIL released),
    which the rest of a busy machine does not add to, so that a sensible rule is not refused because of a
    neighbour. A test gives its own clock (clock.FixedClock)."""

    def __init__(self, seconds: float, clock: Clock = SYSTEM) -> None:
        self.seconds = seconds
        self.clock = clock
        self.started = self.now()
        self.slow: dict[str, float] = {}  # rule → its worst run over SLOT_RULE_MS, in milliseconds (run)
        self.totals: dict[str, float] = {}  # such a rule → all rules' time on the article it was dear on (end_article)
        self._article: dict[str, float] = {}  # rule → its time on the article being checked

    def now(self) -> float:
        return self.clock.monotonic()

    def spent(self) -> bool:
        return self.now() - self.started >= self.seconds

    def check(self) -> None:
        if self.spent():
            raise OutOfTime(f"over {self.seconds:g} s")

    def run(self, rule: str, hits: Callable[[], bool]) -> bool:
        """One regex rule's answer on one article, once the budget allows it (else OutOfTime); a run over
        SLOT_RULE_MS of this thread's CPU time is noted in ``slow`` for the slot to switch the rule off."""
        self.check()
        started = self.clock.cpu()
        try:
            return hits()
        finally:
            ms = (self.clock.cpu() - started) * 1000
            self._article[rule] = self._article.get(rule, 0.0) + ms
            if ms > SLOT_RULE_MS:
                self.slow[rule] = max(ms, self.slow.get(rule, 0.0))

    def end_article(self) -> None:
        """Close one article's account: when its regex rules together took over SLOT_ARTICLE_MS (this thread's
        CPU time), the dearest of them join ``slow`` (the article's total in ``totals``) until the others are
        within it."""
        spent, self._article = self._article, {}
        total = left = sum(spent.values())
        for rule, ms in sorted(spent.items(), key=lambda kv: -kv[1]):
            if left <= SLOT_ARTICLE_MS:
                break
            left -= ms
            if rule not in self.slow:
                self.slow[rule], self.totals[rule] = ms, total


def _run_ms(hits: Callable[[bytes], bool], text: bytes, clock: Clock) -> float:
    started = clock.cpu()
    hits(text)
    return (clock.cpu() - started) * 1000


def _probe_ms(hits: Callable[[bytes], bool], probes: Iterable[bytes], budget: Budget) -> float:
    """The rule's worst time over the probes, in milliseconds, extrapolated to the whole probe.

    Each probe is run over a growing part of itself, from its start: SHORT_BYTES, four times as much, and so
    on up to the whole. It stops growing as soon as a part alone took longer than the limit
    (``(?s).*[^\n].{999}[\n]``, 2 s a probe, is refused after one run over SHORT_BYTES), or when two parts
    in a row took a measurable time that, extrapolated to the whole probe, is far over it: the first run
    also pays once for the automaton's first states (``(.*){1000}#``: ~1 ms over its first thousand bytes,
    0.1 ms over 60,000). A cheap part goes on to the next (RE2's automaton gathers states as it reads). The
    probes stop at the first one over the limit, and when ``budget`` runs out (:class:`OutOfTime`)."""
    worst = 0.0
    for probe in probes:
        budget.check()
        size, far_over = SHORT_BYTES, False
        while True:
            part = probe[:size]
            took = _run_ms(hits, part, budget.clock)
            ms = took * len(probe) / max(1, len(part))
            was_far_over, far_over = far_over, ms > 4 * RULE_PROBE_MS and took >= RULE_PROBE_MS / 10
            if len(part) >= len(probe) or took > RULE_PROBE_MS or (far_over and was_far_over):
                break
            size *= GROWTH
        worst = max(worst, ms)
        if worst > RULE_PROBE_MS:
            break  # over the limit: the other probes cannot take it back
    return worst


def too_slow_to_check() -> str:
    return (f"正则规则太多或太复杂，保存时来不及检查完（上限 {SAVE_SECONDS:g} 秒）："
            "请减少或简化正则规则")


def cost_errors(bodies: Iterable[str], budget: Budget | None = None) -> list[str]:
    """Why these regex rules (their bodies, without the slashes) are too costly to run on every article;
    empty when they are fine. Stops measuring at the first rule over its limit, once the profile is over
    budget, and when ``budget`` (the save's time, SAVE_SECONDS) runs out: a save answers within a second
    whatever was typed."""
    from include.radar.analysis.regex_probes import Unreadable, probes  # a save's: the slots' task processes need none

    budget = budget or Budget(math.inf)
    errors: list[str] = []
    total = 0.0
    try:
        for body in dict.fromkeys(bodies):
            try:
                hits = compile_rule(body)
            except RuleRefused:
                continue  # reported where it was parsed
            try:
                texts = probes(body)
            except Unreadable as exc:
                errors.append(str(exc))
                break
            ms = _probe_ms(hits, texts, budget)
            total += ms
            if ms > RULE_PROBE_MS:
                errors.append(f"正则「/{body}/」在长文上匹配太慢（约 {ms:.0f} 毫秒/篇，上限 {RULE_PROBE_MS:.0f}），"
                              "请去掉嵌套或大范围的重复，如 (a|b)*a(a|b){100}")
                break
            if total > PROFILE_PROBE_MS:
                errors.append(f"正则规则合计在长文上匹配太慢（超过 {PROFILE_PROBE_MS:.0f} 毫秒/篇），请减少或简化正则规则")
                break
    except OutOfTime:
        errors.append(too_slow_to_check())
    return errors
