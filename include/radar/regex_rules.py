"""The reader's ``/regex/`` filter rules, run in time linear in the text whatever the reader types. Pure.

A rule runs over every article's title and text, so it is compiled by RE2 (automata that never backtrack) and
matched as a one-pattern ``re2.Set``: a yes/no from RE2's DFA alone, without the submatch pass, the GIL released.
Linear is not cheap: a DFA with exponentially many states keeps rebuilding its cache. So a rule is measured when
it is saved, over probes built to open its gates and drive its automaton into costly states (:func:`probes`),
and refused over the limits below; a stored rule is not measured again (a busy machine must not drop it): a
slot times each rule instead (:class:`Budget`) and switches off one too slow on one article. What RE2 cannot
take is refused with the reason. The rules: docs/readers-radar.md; the figures: docs/benchmarks.md.
"""

from __future__ import annotations

import random
import re
import re._parser as _sre_parser  # Python's own parser of regexes, to find a rule's literals and classes
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import re2

PROBE_CHARS = 30_000  # the length of text a rule runs over (focus.MATCH_CHARS plus a title)
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


# ------------------------------------------------------------------------------------------------ the probes

_MIXED = "abcdefxyz0123456789 \n.,;:!?-_/()[]{}储能光伏芯片半导体公司订单增长，。、：；“”（）"
_MAX_ALPHABET = 64
_CATEGORIES = {  # RE2's classes are ASCII (its \w is [0-9A-Za-z_])
    "CATEGORY_DIGIT": lambda c: "0" <= c <= "9",
    "CATEGORY_SPACE": lambda c: c in " \t\n\r\f\v",
    "CATEGORY_WORD": lambda c: c.isascii() and (c.isalnum() or c == "_"),
}
_CATEGORY_SAMPLES = {"CATEGORY_DIGIT": "0123456789", "CATEGORY_SPACE": " \t\n", "CATEGORY_WORD": "azAZ09_"}


@lru_cache(maxsize=64)
def _random_text(alphabet: str, seed: int) -> bytes:
    """PROBE_CHARS random characters of ``alphabet`` (at most 256), as UTF-8: ~1 ms, cached per alphabet
    (64 texts of at most ~90 kB)."""
    rng = random.Random(seed)
    table = {i: alphabet[i % len(alphabet)] for i in range(256)}
    return rng.randbytes(PROBE_CHARS).decode("latin-1").translate(table).encode()


@cache
def _fixed_probes() -> tuple[bytes, ...]:
    return (("a" * (PROBE_CHARS - 1) + "!").encode(), _random_text("ab", 1), _random_text(_MIXED, 2))


def _in_class(items: list[tuple[Any, Any]], char: str) -> bool:
    """Whether ``char`` is in the character class ``items`` (Python's parse of ``[...]``), case-insensitively."""
    negate, hit = False, False
    for op, value in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit = hit or chr(value) in (char, char.lower(), char.upper())
        elif name == "RANGE":
            hit = hit or any(value[0] <= ord(c) <= value[1] for c in (char, char.lower(), char.upper()))
        elif name == "CATEGORY":
            test = _CATEGORIES.get(str(value).replace("_NOT", ""))  # CATEGORY_NOT_SPACE: \S
            if test is not None:
                hit = hit or (test(char) != ("_NOT_" in str(value)))
    return hit != negate


def _class_samples(items: list[tuple[Any, Any]]) -> str:
    """Characters a class names itself: its literals, the ends and some middle of its ranges, its categories'."""
    found = []
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            found.append(chr(value))
        elif name == "RANGE":
            low, high = value
            step = max(1, (high - low) // 15)
            found += [chr(c) for c in range(low, high + 1, step)] + [chr(high)]
        elif name == "CATEGORY":
            found.append(_CATEGORY_SAMPLES.get(str(value).replace("_NOT", ""), ""))
    return "".join(found)


@dataclass
class _Shape:
    """What the probes of a rule are made of: the texts a match starts with up to its first repetition of
    varying length (``leads``: its literal prefix, a character of each class, each alternative), its literals,
    a character of each of its one-character classes (``gates``), its classes' alphabets."""

    prefix: str = ""
    literals: list[str] = field(default_factory=list)
    alphabets: list[str] = field(default_factory=list)
    leads: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)


_MAX_LEADS = 4
_CLASS_OPS = ("IN", "ANY", "NOT_LITERAL")
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _class_alphabet(name: str, value: Any, base: str) -> str:
    """The characters of ``base`` (and those the class names itself) that one class of the rule matches."""
    if name == "ANY":
        return base.replace("\n", "")
    if name == "NOT_LITERAL":
        return "".join(c for c in base if c.casefold() != chr(value).casefold())
    candidates = dict.fromkeys(base + _class_samples(value))
    return "".join(c for c in candidates if _in_class(value, c))


def _leads(items: Any, base: str, stops: list[str]) -> list[str]:
    """The texts a match of ``items`` starts with: a literal is itself, a class one character of it, an
    alternation each alternative, a repetition its least number of copies (at most _MAX_LEADS texts). Before
    each repetition of varying length the texts so far go to ``stops``: there a costly part can begin.

    RE2 skips text that cannot start a match at memchr speed, so a rule costly behind a gate
    (``[Kk][ab]*a[ab]{150}c``, ``(K|L)…``, ``\\pN…``, ``.*[Kk]…``) is measured only on a probe that opens
    the gate the way an article can."""
    leads = [""]
    for op, value in items:
        name = str(op)
        if name == "AT":
            continue
        if name == "LITERAL":
            parts = [chr(value)]
        elif name in _CLASS_OPS:
            parts = [_class_alphabet(name, value, base)[:1]]
        elif name == "SUBPATTERN":
            parts = _leads(value[3], base, stops)
        elif name == "BRANCH":
            parts = [lead for alternative in value[1][:_MAX_LEADS] for lead in _leads(alternative, base, stops)]
        elif name in _REPEATS and value[0] <= 40:
            if value[0] != value[1]:
                stops += leads
            parts = [lead * value[0] for lead in _leads(value[2], base, [])]
        else:
            stops += leads
            return []
        leads = list(dict.fromkeys(lead + part for lead in leads for part in parts or [""]))[:_MAX_LEADS]
    return leads


def _parse(body: str) -> list[tuple[Any, Any]] | None:
    """``body`` parsed by Python's own regex parser, once RE2's own classes are written the Python way
    (:func:`_python_syntax`); None when Python cannot read it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(_sre_parser.parse(_python_syntax(body)))
    except Exception:  # re.error, or RE2-only syntax Python's parser trips on
        return None


def _collect(items: Any, literals: list[str], classes: list[tuple[str, Any]], groups: list[str]) -> None:
    """Every literal and one-character class of ``items``, in order, into ``literals`` and ``classes``; a
    repeated group of several literals (``(储能|储|能)*``) also into ``groups``, as one alphabet."""
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            literals.append(chr(value))
        elif name in _CLASS_OPS:
            classes.append((name, value))
        elif name in _REPEATS:
            before = len(literals)
            _collect(value[2], literals, classes, groups)
            if len(literals) - before > 1:
                groups.append("".join(dict.fromkeys(literals[before:])))
        elif name == "SUBPATTERN":
            _collect(value[3], literals, classes, groups)
        elif name == "BRANCH":
            for alternative in value[1]:
                _collect(alternative, literals, classes, groups)
        elif name == "ATOMIC_GROUP":
            _collect(value, literals, classes, groups)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _collect(value[1], literals, classes, groups)


def _literal_prefix(items: Any, prefix: list[str]) -> bool:
    """Append to ``prefix`` the literal run ``items`` starts with; False where the run stops."""
    for op, value in items:
        name = str(op)
        if name == "AT" and not prefix:
            continue
        if name == "LITERAL":
            prefix.append(chr(value))
        elif name == "SUBPATTERN" and _literal_prefix(value[3], prefix):
            continue
        elif name == "BRANCH":
            _literal_prefix(value[1][0], prefix)  # the first alternative stands for the others
            return False
        else:
            return False
    return True


def _parsed_shape(body: str) -> _Shape | None:
    """The shape of ``body`` read by Python's own regex parser (RE2's syntax is close enough for literals and
    classes); None when Python cannot read it."""
    tree = _parse(body)
    if tree is None:
        return None
    shape = _Shape()
    classes: list[tuple[str, Any]] = []
    groups: list[str] = []
    _collect(tree, shape.literals, classes, groups)
    prefix: list[str] = []
    _literal_prefix(tree, prefix)
    shape.prefix = "".join(prefix)[:40]
    base = "".join(dict.fromkeys(_MIXED + "".join(shape.literals)))
    stops: list[str] = []
    ends = _leads(tree, base, stops)
    shape.leads = list(dict.fromkeys(lead[:40] for lead in [*stops, *ends] if lead))[:_MAX_LEADS]
    for name, value in classes:
        alphabet = _class_alphabet(name, value, base)
        if alphabet:
            shape.alphabets.append(_spread(alphabet))
            if name == "IN" and len(alphabet) <= 4:  # [Kk]: a gate wherever it stands, not only first
                shape.gates.append(alphabet[0])
    shape.alphabets += [_spread(group) for group in groups]
    return shape


# RE2's Unicode classes, as Python classes of characters they hold (what the probes are made of, not what they
# match): enough to find a rule's gates and alphabets
_UNICODE_SAMPLES = {"N": "0-9", "Nd": "0-9", "L": "a-zA-Z储能光伏", "Lu": "A-Z", "Ll": "a-z", "Han": "储能光伏芯片",
                    "P": "，。、：；.,;:", "Z": " ", "Zs": " "}
_RE2_ONLY = re.compile(r"\\(?:([pP])(?:\{\^?(\w*)\}|(\w))|x\{([0-9a-fA-F]{1,6})\}|(z)|(C)|(.))", re.S)


def _python_syntax(body: str) -> str:
    """``body`` with RE2's own escapes written so that Python's parser reads it: ``\\pN`` and ``\\p{Han}`` as
    classes of sample characters (``\\PN`` and any other name as ASCII letters and digits), ``\\x{4e00}`` as
    the character, ``\\z`` as ``\\Z``, ``\\C`` as ``.``; inside ``[...]`` without the brackets."""
    out: list[str] = []
    in_class = False
    at = 0
    for match in _RE2_ONLY.finditer(body):
        text = body[at:match.start()]
        for char in text:
            in_class = (in_class and char != "]") or char == "["
        out.append(text)
        at = match.end()
        kind, braced, single, code, end, any_byte, other = match.groups()
        if kind:
            name = braced if braced is not None else single
            chars = _UNICODE_SAMPLES.get(name, "a-zA-Z0-9") if kind == "p" else "a-zA-Z"
            out.append(chars if in_class else f"[{chars}]")
        elif code:
            out.append(re.escape(chr(min(int(code, 16), 0x10FFFF))))
        else:
            out.append("\\Z" if end else "." if any_byte and not in_class else match.group(0))
        in_class = in_class and other != "]"
    out.append(body[at:])
    return "".join(out)


def _spread(alphabet: str) -> str:
    """At most _MAX_ALPHABET characters of ``alphabet``, taken across it (not only its start)."""
    if len(alphabet) <= _MAX_ALPHABET:
        return alphabet
    step = len(alphabet) / _MAX_ALPHABET
    return "".join(alphabet[int(i * step)] for i in range(_MAX_ALPHABET))


_GROUP = re.compile(r"\[\^?((?:\\.|[^\]])*)\]|\(((?:\\.|[^()])*)\)")
_PREFIX = re.compile(r"\^?((?:[^\\.^$|?*+()\[\]{}]|\\[^a-zA-Z0-9])*)")


def _alphabet(text: str) -> str:
    return "".join(sorted({c for c in text if c.isalnum() or ord(c) > 127}))


def _rough_shape(body: str) -> _Shape:
    """The shape of a rule Python's parser cannot read, from its text: the characters of its classes and
    groups, the literal run it starts with."""
    lead = _PREFIX.match(body)
    run = lead.group(1).replace("\\", "") if lead else ""
    if body[len(lead.group(0)) if lead else 0:][:1] in ("?", "*", "{"):
        run = run[:-1]  # the last character is optional or repeated: not part of every match
    alphabets = [_alphabet(m.group(1) or m.group(2) or "") for m in _GROUP.finditer(body)]
    return _Shape(prefix=run[:40], literals=list(_alphabet(body)), alphabets=[a[:_MAX_ALPHABET] for a in alphabets if a])


def probes(body: str) -> list[bytes]:
    r"""The texts a rule is measured on when it is saved, each PROBE_CHARS long:

    - one letter repeated, random text over two letters and over a mixed alphabet (every rule);
    - random text over the rule's own characters;
    - for each of its classes (``[a-b]``, ``[^。]``, ``.``, ``\S``) and repeated groups: the rule's literal prefix
      (``K`` of ``K[a-b]*A[a-b]{150}c``, ``公司`` of ``公司[^。]*增[^。]{200}跌``) followed by random text over the
      class's alphabet, with and without the rule's other literals (the last one left out: it would end the
      runs the class makes). Without the prefix RE2 skips such text at memchr speed, and the costly states are
      never reached: with it they are, as on an article that starts the way the rule does.
    """
    shape = _parsed_shape(body) or _rough_shape(body)
    leads = [lead.encode() for lead in shape.leads or [shape.prefix]]
    own = _alphabet("".join(shape.literals) + "".join(shape.alphabets))
    others = "".join(dict.fromkeys(c for c in "".join(shape.literals[:-1]) + "".join(shape.gates)
                                   if c not in shape.prefix[:1]))
    texts = [_random_text(own[:_MAX_ALPHABET], 3)] if own else []
    for alphabet in list(dict.fromkeys(shape.alphabets))[:4]:
        for variant in dict.fromkeys((alphabet, _spread("".join(dict.fromkeys(alphabet + others))))):
            # one seed: rules that share an alphabet share its text
            texts += [lead + _random_text(variant, 4) for lead in leads]
    return [*_fixed_probes(), *list(dict.fromkeys(texts))[:16]]


# ---------------------------------------------------------------------------------------------- measuring


_clock = time.perf_counter  # what a save's budget is counted on (wall-clock; a test puts its own clock here)
# what a probe's cost is counted on: the CPU time of this thread (RE2 runs in it, the GIL released), which the
# rest of a busy machine does not add to, so that a sensible rule is not refused because of a neighbour
_cost_clock = time.thread_time


class OutOfTime(RuntimeError):
    """A :class:`Budget` ran out before the regex rules were applied to everything."""


class Budget:
    """An allowance of wall-clock seconds on ``clock`` (default: this module's), counted from its creation."""

    def __init__(self, seconds: float, clock: Callable[[], float] | None = None) -> None:
        self.seconds = seconds
        self._clock = clock
        self.started = self.now()
        self.slow: dict[str, float] = {}  # rule → its worst run over SLOT_RULE_MS, in milliseconds (run)

    def now(self) -> float:
        return (self._clock or _clock)()

    def spent(self) -> bool:
        return self.now() - self.started >= self.seconds

    def check(self) -> None:
        if self.spent():
            raise OutOfTime(f"over {self.seconds:g} s")

    def run(self, rule: str, hits: Callable[[], bool]) -> bool:
        """One regex rule's answer on one article, once the budget allows it (else OutOfTime); a run over
        SLOT_RULE_MS of this thread's CPU time is noted in ``slow`` for the slot to switch the rule off."""
        self.check()
        started = _cost_clock()
        try:
            return hits()
        finally:
            ms = (_cost_clock() - started) * 1000
            if ms > SLOT_RULE_MS:
                self.slow[rule] = max(ms, self.slow.get(rule, 0.0))


def _run_ms(hits: Callable[[bytes], bool], text: bytes) -> float:
    started = _cost_clock()
    hits(text)
    return (_cost_clock() - started) * 1000


def _probe_ms(hits: Callable[[bytes], bool], probes: Iterable[bytes], budget: Budget | None = None) -> float:
    """The rule's worst time over the probes, in milliseconds, extrapolated to the whole probe.

    Each probe is run over a growing part of itself, from its start: SHORT_BYTES, four times as much, and so
    on up to the whole. It stops growing as soon as a part alone took longer than the limit, or took a
    measurable time that, extrapolated to the whole probe, is far over it: ``(?s).*[^\n].{999}[\n]``
    (2 s a probe) is refused after one run over SHORT_BYTES. A rule that is cheap on a part goes on to the
    next (its cost may grow with the text: RE2's automaton gathers states as it reads). The probes stop at
    the first one over the limit, and when ``budget`` runs out (:class:`OutOfTime`)."""
    worst = 0.0
    for probe in probes:
        if budget is not None:
            budget.check()
        size = SHORT_BYTES
        while True:
            part = probe[:size]
            took = _run_ms(hits, part)
            ms = took * len(probe) / max(1, len(part))
            if len(part) >= len(probe) or took > RULE_PROBE_MS or (
                    ms > 4 * RULE_PROBE_MS and took >= RULE_PROBE_MS / 10):
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
    errors: list[str] = []
    total = 0.0
    try:
        for body in dict.fromkeys(bodies):
            try:
                hits = compile_rule(body)
            except RuleRefused:
                continue  # reported where it was parsed
            ms = _probe_ms(hits, probes(body), budget)
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
