"""Filter rules a careless or hostile reader can type, and the texts that make a backtracking engine pay for
them. Used by tests/test_rules_redos.py and bench/rules.py; nothing in the product
imports it."""

from __future__ import annotations

import random

TEXT_CHARS = 30_000


RULE_CHARS = 198  # with its slashes, a rule of 200 characters: the longest the form takes


def _two_hundred(unit: str, tail: str) -> str:
    """A rule body that makes a 200-character rule: ``unit`` repeated, then ``tail``."""
    body = unit * ((RULE_CHARS - len(tail)) // len(unit))
    return (body + "a" * (RULE_CHARS - len(tail) - len(body)) + tail)[:RULE_CHARS]


# (family, rule body without the slashes)
CATASTROPHIC_RULES: list[tuple[str, str]] = [
    ("nested quantifier", r"(a+)+$"),  # the repro
    ("nested quantifier", r"(a*)*b"),
    ("nested quantifier", r"((a+)+)+!Z"),
    ("nested quantifier", r"(x+x+)+y"),
    ("nested quantifier", r"(.+)+Z"),
    ("nested quantifier", r"(\w+\s?)*$"),
    ("nested quantifier", r"((((((((((a*)*)*)*)*)*)*)*)*)*)*#"),
    ("nested quantifier", r"(.*a){20}#"),
    ("nested quantifier", r"(.*){30}#"),
    ("alternation under a star", r"(a|aa)*b"),
    ("alternation under a star", r"(a|a?)+$"),
    ("alternation under a star", r"(a|b|ab|ba)*c"),
    ("alternation under a star", r"(储能|储|能)*!Z"),
    ("alternation under a star", r"(.|\s)*Z"),
    ("backreference", r"(a+)\1+$"),
    ("backreference", r"(.)\1{10}Z"),
    ("lookaround", r"(?=(a+))a*b\1"),
    ("lookaround", r"(?!x)(a+)+$"),
    ("lookaround", r"(?<=a)(a+)+$"),
    ("lookaround", r"^(?:(?!Z).)*$"),
    ("state explosion", r"[ab]*a[ab]{100}c"),
    ("state explosion", r"(a|b)*a(a|b){60}"),
    ("state explosion", r"[^x]*a[^x]{150}z"),
    ("state explosion", r"[储能]*储[储能]{100}Z"),
    ("state explosion", r"(.*){1000}#"),
    ("state explosion", r"(.*a){1000}"),
    ("200 characters", _two_hundred("(a+)+", "$")),
    ("200 characters", _two_hundred("(a|aa)*", "b")),
    ("200 characters", ("(" + "|".join(f"w{i}x?" for i in range(60)))[:RULE_CHARS - 3] + ")*q"),
    ("200 characters", _two_hundred("(.*){9}", "#")),
    ("200 characters", _two_hundred("a?", "a" * 10)),
    # behind a literal prefix: cheap on any text that lacks it, so probes without it let them through
    ("gated state explosion", r"K[a-b]*A[a-b]{150}c"),
    ("gated state explosion", r"公司[^。]*增[^。]{200}跌"),
    # read by no probe before: RE2's own syntax Python's parser cannot read ((?U), \Q…\E), a fifth alternative
    ("unread by the probes", r"(?U)K[ab]*a[ab]{150}c"),
    ("unread by the probes", r"\Q\EK[ab]*a[ab]{150}c"),
    ("unread by the probes", r"foo|bar|baz|qux|K[ab]*a[ab]{150}c"),
    # behind a Unicode class no article here uses: probed once with ASCII that class never matches
    ("behind a Unicode class", r"\p{Greek}[ab]*a[ab]{150}c"),
    ("behind a Unicode class", r"\PL[ab]*a[ab]{150}c"),
    # seconds on every probe: what matters is how fast the save refuses them
    ("slow to refuse", r"(?s).*[^\n].{999}[\n]"),
    ("slow to refuse", r"(?s).*\S.{999}\x01"),
]
# nineteen of the gated kind (an audit's): each ~1 ms on probes without their prefix
GATED_NINETEEN: list[str] = [f"K[a-b]*A[a-b]{{150}}{c}" for c in "cdefghijklmnopqrstu"]
# twenty the probes did not read (an audit's), each ~45 ms on a crafted article: just under the switch-off of one
# rule (regex_rules.SLOT_RULE_MS), about a second an article together
UNREAD_TWENTY: list[str] = [f"{shape}K[ab]*a[ab]{{150}}{c}" for shape, c in zip(
    ["(?U)", "\\Q\\E", "foo|bar|baz|qux|"] * 7, "cdefghijklmnopqrstuv", strict=False)]


def texts() -> dict[str, str]:
    """Article texts of 30,000 characters that drive the rules above into their worst cases."""
    rng = random.Random(24)
    return {
        "the issue's repro": "a" * 40 + "!",
        "one letter": "a" * (TEXT_CHARS - 1) + "!",
        "two letters": "".join(rng.choice("ab") for _ in range(TEXT_CHARS)),
        "two characters": "".join(rng.choice("储能") for _ in range(TEXT_CHARS)),
        "mixed": "".join(rng.choice("abcxyz 01\n储能光伏，。") for _ in range(TEXT_CHARS)),
        "a literal, then two letters": "K" + "".join(rng.choice("aAbB") for _ in range(TEXT_CHARS - 1)),
        "公司, then no 。": "公司" + "".join(rng.choice("增长订单储能光伏公司，、ab1") for _ in range(TEXT_CHARS - 2)),
    }
