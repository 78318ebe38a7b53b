"""The probes a reader's ``/regex/`` rule is measured on when it is saved (regex_rules.cost_errors). Pure.

RE2 skips text that cannot start a match at memchr speed, so a rule costly only once a gate opens
(``K[ab]*a[ab]{150}c``, ``公司[^。]*增…``, ``foo|bar|…|K…``) is cheap on ordinary text. The probes are built from
the rule's shape, read by Python's own regex parser once RE2's own syntax is written the Python way: the texts
a match starts with, each place a costly part can begin (every alternative's), the alphabets of its classes.
A rule the parser still cannot read is refused, never probed blind. The rules: docs/readers-radar.md.
"""

from __future__ import annotations

import array
import random
import re
import re._parser as _sre_parser  # Python's own parser of regexes, to find a rule's literals and classes
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import re2

PROBE_CHARS = 30_000  # the length of text a rule runs over (focus.MATCH_CHARS plus a title)
MAX_STOPS = 64  # the places a costly part can begin that a save probes, one by one: a rule with more is refused


class Unreadable(ValueError):
    """A rule the probes cannot be built for; the message is for the reader (Chinese) and names the rule."""

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
    stops: list[tuple[str, str]] = field(default_factory=list)  # (a text a match starts with, what repeats next)


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


def _item_alphabet(items: Any, base: str) -> str:
    """The characters a repeated item is made of: its literals and its classes' characters of ``base``."""
    literals: list[str] = []
    classes: list[tuple[str, Any]] = []
    _collect(items, literals, classes, [])
    chars = "".join(literals) + "".join(_class_alphabet(name, value, base) for name, value in classes)
    return _spread("".join(dict.fromkeys(chars)))


def _inner(items: Any, base: str, leads: list[str], stops: list[tuple[str, str]]) -> list[str]:
    """The leads of a group or an alternative; the places its costly parts begin go to ``stops`` after each of
    the texts before it (``x(K[ab]*…)``: ``xK``, not ``K``, opens it)."""
    found: list[tuple[str, str]] = []
    ends = _leads(items, base, found)
    stops += [(lead + text, alphabet) for lead in leads for text, alphabet in found]
    return ends


def _leads(items: Any, base: str, stops: list[tuple[str, str]]) -> list[str]:
    """The texts a match of ``items`` starts with: a literal is itself, a class one character of it, an
    alternation each alternative, a repetition its least number of copies (at most _MAX_LEADS texts). Before
    each repetition of varying length the texts so far go to ``stops``, with what the repetition is made of:
    there a costly part can begin. Every alternative is followed, each may begin one of its own.

    RE2 skips text that cannot start a match at memchr speed, so a rule costly behind a gate
    (``[Kk][ab]*a[ab]{150}c``, ``(K|L)…``, ``\\pN…``, ``.*[Kk]…``, ``foo|bar|…|K…``) is measured only on a probe
    that opens the gate the way an article can."""
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
            parts = _inner(value[3], base, leads, stops)
        elif name == "BRANCH":
            parts = [lead for alternative in value[1] for lead in _inner(alternative, base, leads, stops)]
        elif name in _REPEATS and value[0] <= 40:
            if value[0] != value[1]:
                stops += [(lead, _item_alphabet(value[2], base)) for lead in leads]
            parts = [lead * value[0] for lead in _inner(value[2], base, leads, stops)]
        else:
            repeated = _item_alphabet(value[2], base) if name in _REPEATS else ""
            stops += [(lead, repeated) for lead in leads]
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
    stops: list[tuple[str, str]] = []
    ends = _leads(tree, base, stops)
    shape.leads = list(dict.fromkeys(lead[:40] for lead in [*(s for s, _ in stops), *ends] if lead))[:_MAX_LEADS]
    shape.stops = list(dict.fromkeys((lead[:40], alphabet) for lead, alphabet in stops if alphabet))
    for name, value in classes:
        alphabet = _class_alphabet(name, value, base)
        if alphabet:
            shape.alphabets.append(_spread(alphabet))
            if name == "IN" and len(alphabet) <= 4:  # [Kk]: a gate wherever it stands, not only first
                shape.gates.append(alphabet[0])
    shape.alphabets += [_spread(group) for group in groups]
    return shape


# RE2's Unicode classes an article here is full of, as Python classes of the characters it would hold (what the
# probes are made of, not what they match); every class also gets those RE2 finds in it (_property_chars)
_UNICODE_SAMPLES = {"N": "0-9", "Nd": "0-9", "L": "a-zA-Z储能光伏", "Lu": "A-Z", "Ll": "a-z", "Han": "储能光伏芯片",
                    "P": "，。、：；.,;:", "Z": " ", "Zs": " "}
_UNIVERSE_CHUNKS = 64  # Unicode read in as many parts, each giving the first run of a class's characters in it
_RUN = 4  # characters of that run


@cache
def _universe() -> tuple[bytes, ...]:
    """Every code point but NUL and the surrogates, as UTF-8, in _UNIVERSE_CHUNKS parts (~4 MB, ~25 ms once)."""
    points = array.array("I", range(1, 0xD800))
    points.extend(range(0xE000, 0x110000))
    text = points.tobytes().decode(f"utf-32-{'le' if sys.byteorder == 'little' else 'be'}")
    size = -(-len(text) // _UNIVERSE_CHUNKS)
    return tuple(text[at:at + size].encode() for at in range(0, len(text), size))


@lru_cache(maxsize=256)
def _property_chars(escape: str, name: str | None) -> str:
    """A Unicode class of RE2's (``\\pN``, ``\\p{Greek}``, ``\\PL``, ``\\p{^Han}``) as the Python text of its characters
    the probes are made of: those an article here is full of (_UNICODE_SAMPLES for ``name`` when the class is
    not negated, then _MIXED's in it), then the first few RE2 itself finds in each part of Unicode. A class no sample names
    (``\\p{Greek}``, ``\\p{Sc}``, ``\\PL``) is opened with its own characters, not with ASCII it never matches;
    one RE2 finds nothing in is empty (the rule is unreadable, refused). ~6 ms a class, cached."""
    options = re2.Options()
    options.log_errors = False
    try:
        run = re2.compile(f"(?:{escape}){{1,{_RUN}}}", options)
    except Exception:  # re2.error: a class RE2 does not know (the rule itself was refused when compiled)
        return ""
    found = (run.search(chunk) for chunk in _universe())
    chars = [c for c in _MIXED if run.fullmatch(c)] + [match.group().decode() for match in found if match]
    return _UNICODE_SAMPLES.get(name or "", "") + "".join(re.escape(c) for c in dict.fromkeys("".join(chars)))
# POSIX classes inside [...] (RE2 reads them, Python takes them for their characters), as Python ranges
_POSIX = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z", "space": r" \t\n",
          "blank": r" \t", "punct": r"!-/:-@\[-`{-~", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f", "cntrl": r"\x00-\x1f",
          "print": " -~", "graph": "!-~", "ascii": r"\x00-\x7f"}
_RE2_ONLY = re.compile(
    r"\\(?:(?P<kind>[pP])(?:\{\^?(?P<braced>\w*)\}|(?P<single>\w))|x\{(?P<code>[0-9a-fA-F]{1,6})\}|(?P<end>z)"
    r"|(?P<any>C)|Q(?P<quoted>.*?)(?:\\E|$)|(?P<octal>[0-7]{3})|(?P<other>.))"
    r"|\(\?(?P<flags>[imsU]+(?:-[imsU]*)?|-[imsU]+)(?P<close>[:)])|(?P<named>\(\?P<\w+>)"
    r"|\[:(?P<negated>\^?)(?P<posix>[a-z]+):\]", re.S)


def _posix(name: str, negated: str) -> str:
    """A POSIX class's characters as Python writes them inside [...]; negated, the sample characters outside."""
    chars = _POSIX.get(name, "a-zA-Z0-9")
    if not negated:
        return chars
    return "".join(re.escape(c) for c in dict.fromkeys(_MIXED + "ABCZ!~") if not re.fullmatch(f"[{chars}]", c))


def _escape(match: re.Match[str], in_class: bool) -> str:
    """One RE2-only escape (the backslash alternatives of _RE2_ONLY) written the Python way."""
    if match["kind"]:
        name = match["braced"] if match["braced"] is not None else match["single"]
        positive = match["kind"] == "p" and not match.group(0).startswith("\\p{^")
        chars = _property_chars(match.group(0), name if positive else None)
        if not chars:  # \\P{Any}, \\p{Cs} (no UTF-8 text holds a surrogate): Python would read [] as a "]"
            raise ValueError(f"no character is in {match.group(0)}")
        return chars if in_class else f"[{chars}]"
    if match["code"]:
        return re.escape(chr(min(int(match["code"], 16), 0x10FFFF)))
    if match["quoted"] is not None:
        return re.escape(match["quoted"])
    if match["octal"]:
        return re.escape(chr(int(match["octal"], 8)))
    return "\\Z" if match["end"] else "." if match["any"] and not in_class else match.group(0)


def _python_syntax(body: str) -> str:
    """``body`` with RE2's own syntax written so that Python's parser reads it: ``\\pN``, ``\\p{Greek}``, ``\\PL``
    as classes of sample characters of theirs (:func:`_property_chars`), ``\\x{4e00}`` as
    the character, ``\\z`` as ``\\Z``, ``\\C`` as ``.``, ``\\Q…\\E`` as the escaped text, ``\\400`` as the
    character, flags anywhere (``(?U)``, ``(?i-s:``; rules match without case anyway) dropped, group names
    dropped, ``[[:alpha:]]`` as ``[a-zA-Z]``; inside ``[...]`` without the brackets."""
    out: list[str] = []
    in_class = False
    at = 0
    for match in _RE2_ONLY.finditer(body):
        text = body[at:match.start()]
        for char in text:
            in_class = (in_class and char != "]") or char == "["
        out.append(text)
        at = match.end()
        if match["flags"] is not None:
            out.append(match.group(0) if in_class else "(?:" if match["close"] == ":" else "")
        elif match["named"]:
            out.append(match.group(0) if in_class else "(")  # RE2 lets two groups share a name
        elif match["posix"] is not None:
            out.append(_posix(match["posix"], match["negated"]) if in_class else match.group(0))
        else:
            out.append(_escape(match, in_class))
            in_class = in_class and match["other"] != "]"
    out.append(body[at:])
    return "".join(out)


def _spread(alphabet: str) -> str:
    """At most _MAX_ALPHABET characters of ``alphabet``, taken across it (not only its start)."""
    if len(alphabet) <= _MAX_ALPHABET:
        return alphabet
    step = len(alphabet) / _MAX_ALPHABET
    return "".join(alphabet[int(i * step)] for i in range(_MAX_ALPHABET))


def _alphabet(text: str) -> str:
    return "".join(sorted({c for c in text if c.isalnum() or ord(c) > 127}))


def probes(body: str) -> Iterator[bytes]:
    r"""The texts a rule is measured on when it is saved, each PROBE_CHARS long, made as they are measured: one
    letter repeated, random text over two letters and over a mixed alphabet (every rule); random text over the
    rule's own characters; its literal prefix (``K`` of ``K[a-b]*A[a-b]{150}c``, ``公司`` of ``公司[^。]*增…``)
    or first leads followed by random text over each class's alphabet, with and without the rule's other
    literals; then each place a costly part can begin (every alternative's, ``foo|bar|…|K[ab]*…``), one by
    one: the text before it followed by what repeats there. Without that text RE2 skips such runs at memchr
    speed and the costly states are never reached; with it they are, as on an article that starts that way.

    Raises Unreadable for a rule Python's parser cannot read once RE2's own syntax is rewritten (its probes
    could miss its gates), or with more than MAX_STOPS such places."""
    shape = _parsed_shape(body)
    if shape is None:
        raise Unreadable(f"正则「/{body}/」的写法无法在保存时检查其耗时，请改用常见写法")
    if len(shape.stops) > MAX_STOPS:
        raise Unreadable(f"正则「/{body}/」的分支和重复太多（{len(shape.stops)} 处，上限 {MAX_STOPS}），"
                          "保存时无法逐一检查，请拆成几条规则")
    return _texts(shape)


def _texts(shape: _Shape) -> Iterator[bytes]:
    leads = [lead.encode() for lead in shape.leads or [shape.prefix]]
    own = _alphabet("".join(shape.literals) + "".join(shape.alphabets))
    others = "".join(dict.fromkeys(c for c in "".join(shape.literals[:-1]) + "".join(shape.gates)
                                   if c not in shape.prefix[:1]))
    texts = [_random_text(own[:_MAX_ALPHABET], 3)] if own else []
    made: set[tuple[bytes, str]] = set()
    for alphabet in list(dict.fromkeys(shape.alphabets))[:4]:
        for variant in dict.fromkeys((alphabet, _spread("".join(dict.fromkeys(alphabet + others))))):
            # one seed: rules that share an alphabet share its text
            texts += [lead + _random_text(variant, 4) for lead in leads]
            made.update((lead, variant) for lead in leads)
    yield from _fixed_probes()
    yield from list(dict.fromkeys(texts))[:16]
    for lead, alphabet in shape.stops:
        for variant in dict.fromkeys((alphabet, _spread("".join(dict.fromkeys(alphabet + others))))):
            if (lead.encode(), variant) not in made:
                made.add((lead.encode(), variant))
                yield lead.encode() + _random_text(variant, 4)
