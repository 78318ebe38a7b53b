"""The reader's focus: a watchlist the ranking boosts and filter rules that keep articles from the LLM. Pure.

The profile (reader_profile, edited on /profile) lists companies, tickers and sectors the radar looks for in
the title and text (a hit is stored as ``watch_hits`` and boosts the rank); interests, free text only the model
reads; and rules, one per line, each a word or a ``/regex/``: ``word`` (any of them must appear), ``+word``
(must appear), ``!word`` (excludes). An excluded article is never sent to the LLM and is counted on its slot.
Matching ignores case; a ticker matches with its exchange prefix or suffix. Regexes run on RE2 in linear time
over at most ``MATCH_CHARS``, refused when RE2 cannot take them or, saved from the form, when too costly
(regex_rules.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from include.radar.analysis import regex_rules
from include.radar.core.clock import SYSTEM, Clock

MAX_ITEMS = 50  # per list
MAX_ITEM_CHARS = 60
MAX_RULES = 100
MAX_RULE_CHARS = 200
MATCH_CHARS = 30_000  # rules and watchlist look at the title and this much of the text
RECHECK_HOURS = 72  # changed rules are applied again to what they excluded of the articles a slot still looks at
_SPLIT = re.compile(r"[\n,，、;；]+")
_TICKER_AFFIX = re.compile(r"^(?:SH|SZ|BJ|HK)(?=\d)|\.(?:SH|SZ|BJ|HK|SS|US|O|N)$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class ProfileError(ValueError):
    """What the reader typed cannot be saved; ``errors`` says which line and why, in the page's language."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Haystack:
    """What the rules look at: the title and the first MATCH_CHARS of the text, and its UTF-8 bytes (what RE2
    reads; encoded once per article, whatever the number of regex rules)."""

    text: str

    @classmethod
    def of(cls, title: str | None, text: str | None) -> Haystack:
        return cls(f"{title or ''}\n{(text or '')[:MATCH_CHARS]}")

    @property
    def utf8(self) -> bytes:
        encoded = self.__dict__.get("_utf8")
        if encoded is None:
            encoded = self.text.encode("utf-8", "replace")
            object.__setattr__(self, "_utf8", encoded)
        return encoded


@dataclass(frozen=True)
class Rule:
    kind: str  # any | must | never
    text: str  # as the reader wrote it, without the +/! mark
    word: re.Pattern[str] | None = None  # a plain word (escaped: a literal search)
    regex: Any = None  # a /regex/: RE2's matcher of UTF-8 bytes (regex_rules.compile_rule)

    @property
    def label(self) -> str:
        return {"any": "", "must": "+", "never": "!"}[self.kind] + self.text

    @property
    def is_regex(self) -> bool:
        return self.regex is not None

    def hits(self, haystack: Haystack) -> bool:
        if self.regex is not None:
            return self.regex(haystack.utf8)
        assert self.word is not None
        return self.word.search(haystack.text) is not None


def parse_rule(line: str) -> Rule:
    """One rule line; raises ValueError (with a Chinese message) when it cannot be used."""
    text = line.strip()
    kind = "any"
    if text[:1] in ("+", "!", "！"):
        kind = "must" if text[0] == "+" else "never"
        text = text[1:].strip()
    if not text:
        raise ValueError(f"「{line.strip()}」缺少要匹配的词")
    if len(text) > MAX_RULE_CHARS:
        raise ValueError(f"「{text[:20]}…」超过 {MAX_RULE_CHARS} 个字符")
    if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
        try:
            regex = regex_rules.compile_rule(text[1:-1])
        except regex_rules.RuleRefused as exc:
            raise ValueError(str(exc)) from None
        if regex(b""):
            raise ValueError(f"正则「{text}」能匹配空文本，会命中所有文章")
        return Rule(kind, text, regex=regex)
    return Rule(kind, text, word=re.compile(re.escape(text), re.IGNORECASE))


def clean_items(values: Iterable[str], what: str) -> tuple[list[str], list[str]]:
    """A list as typed (lines, or separated by commas/、/;): trimmed, de-duplicated, bounded; with errors."""
    items: list[str] = []
    errors: list[str] = []
    for value in values:
        for part in _SPLIT.split(_CONTROL.sub("", value or "")):
            item = " ".join(part.split())
            if not item or item.casefold() in (i.casefold() for i in items):
                continue
            if len(item) > MAX_ITEM_CHARS:
                errors.append(f"{what}「{item[:20]}…」超过 {MAX_ITEM_CHARS} 个字符")
                continue
            items.append(item)
    if len(items) > MAX_ITEMS:
        errors.append(f"{what}最多 {MAX_ITEMS} 项（现有 {len(items)} 项）")
    return items[:MAX_ITEMS], errors


def ticker_key(ticker: str) -> str:
    """``600519.SH``, ``SH600519`` and ``600519`` are one ticker; letters are compared case-insensitively."""
    return _TICKER_AFFIX.sub("", ticker.strip()).casefold()


_CODE = re.compile(r"[0-9]{4,6}")
_PREFIXES = ("SH", "SZ", "BJ", "HK")
_SUFFIXES = ("SH", "SZ", "BJ", "HK", "SS")


def ticker_spellings(name: str) -> list[str]:
    """Every way an analysis may write the stock code ``name`` names (``600519``, ``600519.SH``,
    ``SH600519``, ``sh600519``…), for an exact lookup in ``opportunity.targets``; a name that is no numeric
    code (a company, a sector, ``AAPL.O``) is only itself."""
    key = ticker_key(name)
    if not _CODE.fullmatch(key):
        return [name]
    spellings = {name.strip(), key}
    for mark in _PREFIXES:
        spellings |= {mark + key, mark.lower() + key}
    for mark in _SUFFIXES:
        spellings |= {f"{key}.{mark}", f"{key}.{mark.lower()}"}
    return sorted(spellings)


@dataclass(frozen=True)
class Profile:
    companies: tuple[str, ...] = ()
    tickers: tuple[str, ...] = ()
    sectors: tuple[str, ...] = ()
    interests: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    updated_at: Any = None
    updated_by: str | None = None
    disabled: tuple[str, ...] = ()  # stored rules this version cannot run, with the reason (from_row)
    slow: tuple[str, ...] = ()  # stored regex rules a slot switched off as too slow, with the reason
    _watch: tuple[tuple[str, re.Pattern[str]], ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def build(cls, *, companies: Iterable[str] = (), tickers: Iterable[str] = (), sectors: Iterable[str] = (),
              interests: Iterable[str] = (), rules: Iterable[str] = (), measure: bool = False,
              clock: Clock = SYSTEM) -> Profile:
        """A profile from stored or typed lists; raises ProfileError listing every line it cannot use.

        ``measure`` (a profile typed on the form): also refuse regex rules too costly to run on every article
        (regex_rules.cost_errors), all of it within regex_rules.SAVE_SECONDS on ``clock``. A stored profile is not measured
        again: it passed when it was saved, and a slot must not drop a rule because the machine was busy when it
        loaded it (its selection has a time budget instead)."""
        errors: list[str] = []
        lists = {}
        for name, values, what in (("companies", companies, "公司"), ("tickers", tickers, "股票代码"),
                                   ("sectors", sectors, "行业"), ("interests", interests, "兴趣")):
            lists[name], problems = clean_items(values, what)
            errors += problems
        parsed: list[Rule] = []
        lines = [line for value in rules for line in (value or "").splitlines() if line.strip()]
        budget = regex_rules.Budget(regex_rules.SAVE_SECONDS, clock) if measure else None
        for line in lines[:MAX_RULES]:
            if budget is not None and budget.spent():  # compiling 100 rules of RE2's largest takes seconds
                errors.append(regex_rules.too_slow_to_check())
                break
            try:
                parsed.append(parse_rule(_CONTROL.sub("", line)))
            except ValueError as exc:
                errors.append(str(exc))
        if len(lines) > MAX_RULES:
            errors.append(f"过滤规则最多 {MAX_RULES} 行（现有 {len(lines)} 行）")
        if measure and not errors:
            errors += regex_rules.cost_errors((r.text[1:-1] for r in parsed if r.is_regex), budget)
        if errors:
            raise ProfileError(errors)
        watch = [(name, re.compile(re.escape(name), re.IGNORECASE)) for name in (*lists["companies"], *lists["sectors"])]
        watch += [(t, re.compile(r"(?<![0-9A-Za-z])" + re.escape(ticker_key(t)) + r"(?![0-9A-Za-z])", re.IGNORECASE))
                  for t in lists["tickers"] if ticker_key(t)]
        return cls(tuple(lists["companies"]), tuple(lists["tickers"]), tuple(lists["sectors"]),
                   tuple(lists["interests"]), tuple(parsed), _watch=tuple(watch))

    @property
    def empty(self) -> bool:
        return not (self.companies or self.tickers or self.sectors or self.interests or self.rules)

    @property
    def has_watchlist(self) -> bool:
        return bool(self.companies or self.tickers or self.sectors or self.interests)

    def rule_lines(self) -> list[str]:
        return [r.label for r in self.rules]

    def exclusion(self, title: str, text: str, budget: regex_rules.Budget | None = None) -> str | None:
        """Why the rules keep this article from the LLM (the rule, as the reader wrote it), or None.

        With a ``budget``, raises regex_rules.OutOfTime instead of running a regex rule once it is spent: the
        article is then neither let through nor excluded, it waits; what its rules cost is counted on it
        (Budget.end_article)."""
        try:
            return self._exclusion(Haystack.of(title, text), budget)
        finally:
            if budget is not None:
                budget.end_article()

    def _exclusion(self, haystack: Haystack, budget: regex_rules.Budget | None) -> str | None:
        def hits(rule: Rule) -> bool:
            if budget is not None and rule.is_regex:
                return budget.run(rule.label, lambda: rule.hits(haystack))
            return rule.hits(haystack)

        for rule in self.rules:
            if rule.kind == "never" and hits(rule):
                return f"命中排除词 {rule.label}"
        for rule in self.rules:
            if rule.kind == "must" and not hits(rule):
                return f"缺少必含词 {rule.label}"
        wanted = [r for r in self.rules if r.kind == "any"]
        if wanted and not any(hits(r) for r in wanted):
            return "不含任何关注词（" + " ".join(r.label for r in wanted[:5]) + (" 等" if len(wanted) > 5 else "") + "）"
        return None

    def switched_off(self, reasons: Mapping[str, str]) -> Profile:
        """This profile without the regex rules a slot switched off (``reasons``: rule label → why), which it
        lists in ``slow`` for the profile page."""
        off = {r.label for r in self.rules if r.is_regex and r.label in reasons}
        if not off:
            return self
        return replace(self, rules=tuple(r for r in self.rules if r.label not in off),
                       slow=self.slow + tuple(f"{label}：{reasons[label]}" for label in off))

    def watch_hits(self, title: str, text: str) -> list[str]:
        """The watchlist entries (companies, sectors, tickers) named in the title or the text."""
        haystack = Haystack.of(title, text).text
        return [name for name, pattern in self._watch if pattern.search(haystack)]

    def prompt_block(self) -> str:
        """The profile as the analysis prompt's system part carries it: compact, one line per list."""
        if not self.has_watchlist:
            return "（读者未设置关注列表：watchlist.touches 填 false，how 留空。）"
        lines = []
        for label, items in (("公司", self.companies), ("股票代码", self.tickers), ("行业", self.sectors),
                             ("兴趣", self.interests)):
            if items:
                lines.append(f"- {label}：" + "；".join(items))
        return "\n".join(lines)


def from_row(row: dict[str, Any] | None, slow: Mapping[str, str] | None = None) -> Profile:
    """The stored profile, without the regex rules slots switched off (``slow``, store.focus.slow_rules). A row saved
    by an older version that no longer parses keeps what still does; the rules it drops (a Python-only regex:
    a lookaround, a backreference) are listed in ``disabled`` with the reason, for the profile page to show."""
    return _stored(row).switched_off(slow or {})


def _stored(row: dict[str, Any] | None) -> Profile:
    if row is None:
        return Profile()
    saved = {"updated_at": row["updated_at"], "updated_by": row["updated_by"]}
    try:
        return replace(Profile.build(companies=row["companies"], tickers=row["tickers"], sectors=row["sectors"],
                                     interests=row["interests"], rules=row["rules"]), **saved)
    except ProfileError:
        good, disabled = [], []
        for line in row["rules"]:
            try:
                parse_rule(_CONTROL.sub("", line))
            except ValueError as exc:
                disabled.append(str(exc))
                continue
            good.append(line)
        profile = Profile.build(companies=row["companies"][:MAX_ITEMS], tickers=row["tickers"][:MAX_ITEMS],
                                sectors=row["sectors"][:MAX_ITEMS], interests=row["interests"][:MAX_ITEMS],
                                rules=good[:MAX_RULES])
        return replace(profile, disabled=tuple(disabled), **saved)
