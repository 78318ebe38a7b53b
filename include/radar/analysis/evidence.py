"""Checking an analysis against its article: every evidence quote is looked up in the cleaned text, and the
score must agree with the model's own "has opportunity" flag.

Quotes are compared normalised (NFKC, no quotation marks, brackets or whitespace, Latin lower-cased); a quote
with an ellipsis is found when its parts (six characters or more) appear in order in one passage; a changed
or cut number is not the same quote. A found quote keeps its offsets and sentence, for the analysis page. A
contradiction is resolved conservatively (a "no" above the threshold is lowered just below it; a "yes" far
below drops the flag), the reason recorded, after the ladder asked the model once more when it could.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from include.radar.analysis.schemas import ArticleAnalysis

# characters that differ between a quote and its source without changing what it says
_DROP = set("\"'“”‘’「」『』《》〈〉〔〕【】()（）[]<>`") | {"\u00a0", "\u3000"}
_ELLIPSIS = re.compile(r"(?:…|\.\.\.|。。。)+")
_SENTENCE_END = "。！？!?；;\n"
# "far below": a flag saying yes on a score this far under the threshold is a contradiction
FAR_BELOW = 20
CONTEXT_CHARS = 80
# a quote (each part of one with an ellipsis) has at least this many comparable characters, and the parts of
# one quote lie at most this far apart
MIN_QUOTE = 6
MAX_GAP = 60
_NUMBER_GOES_ON = set("0123456789.")

EVIDENCE_AGAIN = ("你给出的 evidence 在文章中找不到原文。evidence 必须是从 <<<ARTICLE_START>>> 与 <<<ARTICLE_END>>> "
                  "之间逐字复制的短句（不改数字、不改措辞、不加引号），找不到原文支持的机会请降低评分。")
CONSISTENCY_AGAIN = ("你的 score 与 has_opportunity 相互矛盾：score ≥ {threshold} 时 has_opportunity 必须为 true，"
                     "score 远低于 {threshold} 时必须为 false。请重新评估后输出完整 json。")


def _normalise(text: str) -> tuple[str, list[int]]:
    """The comparable form of ``text`` and, for each of its characters, the index in ``text`` it came from."""
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch):
            if c in _DROP or c.isspace():
                continue
            out.append(c.lower())
            where.append(i)
    return "".join(out), where


@dataclass(frozen=True)
class QuoteCheck:
    quote: str
    opportunity: int  # index of the opportunity that gave it
    verified: bool
    start: int | None = None  # offsets in the clean text
    end: int | None = None
    context: str = ""  # the sentence(s) around it

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Verdict:
    quotes: list[QuoteCheck] = field(default_factory=list)
    consistency: str | None = None  # why score and flag disagree, when they do

    @property
    def verified(self) -> int:
        return sum(1 for q in self.quotes if q.verified)

    @property
    def unverified(self) -> int:
        return len(self.quotes) - self.verified


class Article:
    """A cleaned article text, normalised once for many lookups."""

    def __init__(self, text: str) -> None:
        self.text = text or ""
        self.norm, self.where = _normalise(self.text)

    def find(self, quote: str) -> tuple[int, int] | None:
        """Where ``quote`` is in the article (offsets in the original text), or None.

        One part must be at least ``MIN_QUOTE`` characters; with an ellipsis every part must, and the parts
        must come in order within ``MAX_GAP`` characters of each other (one passage, not words picked from
        across the article). A part never matches inside a longer number (``增长3`` is not ``增长30%``).
        """
        parts = [p for p in (_normalise(part)[0] for part in _ELLIPSIS.split(quote)) if p]
        if not parts or any(len(p) < MIN_QUOTE for p in parts):  # too short to prove anything
            return None
        for start in self._occurrences(parts[0], 0):
            at = start + len(parts[0])
            for part in parts[1:]:
                found = next((f for f in self._occurrences(part, at) if f - at <= MAX_GAP), None)
                if found is None:
                    break
                at = found + len(part)
            else:
                return self.where[start], self.where[at - 1] + 1
        return None

    def _occurrences(self, part: str, at: int) -> Iterator[int]:
        """Each place ``part`` occurs from ``at`` on, where it does not cut a number in two."""
        found = self.norm.find(part, at)
        while found >= 0:
            end = found + len(part)
            cuts_before = part[0].isdigit() and found > 0 and self.norm[found - 1].isdigit()
            cuts_after = part[-1].isdigit() and end < len(self.norm) and self.norm[end] in _NUMBER_GOES_ON
            if not (cuts_before or cuts_after):
                yield found
            found = self.norm.find(part, found + 1)

    def context(self, start: int, end: int) -> str:
        left = max((self.text.rfind(ch, 0, start) for ch in _SENTENCE_END), default=-1) + 1
        left = max(left, start - CONTEXT_CHARS)
        rights = [i for i in (self.text.find(ch, end) for ch in _SENTENCE_END) if i >= 0]
        right = min([*rights, end + CONTEXT_CHARS, len(self.text) - 1]) + 1
        return self.text[left:right].strip()


def check(answer: ArticleAnalysis, article: Article, threshold: int) -> Verdict:
    verdict = Verdict()
    for index, opportunity in enumerate(answer.opportunities):
        for quote in opportunity.evidence:
            span = article.find(quote)
            if span is None:
                verdict.quotes.append(QuoteCheck(quote, index, False))
            else:
                verdict.quotes.append(QuoteCheck(quote, index, True, span[0], span[1], article.context(*span)))
    if not answer.has_opportunity and answer.score >= threshold:
        verdict.consistency = (f"评分 {answer.score} ≥ 阈值 {threshold}，但模型判断没有机会：按“没有机会”处理，"
                               f"评分降为 {threshold - 1}")
    elif answer.has_opportunity and answer.score < threshold - FAR_BELOW:
        verdict.consistency = (f"模型判断有机会，但评分 {answer.score} 远低于阈值 {threshold}：按评分处理为没有机会")
    return verdict


def needs_repair(answer: ArticleAnalysis, article: Article, threshold: int) -> str | None:
    """The instruction for one more rung, when the answer would push on evidence the article does not hold
    or contradicts itself; None when it stands. Never asks about an answer that could not push anyway."""
    verdict = check(answer, article, threshold)
    if verdict.consistency:
        return CONSISTENCY_AGAIN.format(threshold=threshold)
    if answer.score >= threshold and verdict.verified == 0:
        return EVIDENCE_AGAIN
    return None


def settle(answer: ArticleAnalysis, article: Article, threshold: int) -> tuple[ArticleAnalysis, Verdict]:
    """The answer as stored: a contradiction resolved conservatively, with the verdict to record."""
    verdict = check(answer, article, threshold)
    if verdict.consistency and not answer.has_opportunity:
        answer = answer.model_copy(update={"score": min(answer.score, threshold - 1)})
    elif verdict.consistency:
        answer = answer.model_copy(update={"has_opportunity": False})
    return answer, verdict


def verified_flag(answer: ArticleAnalysis, verdict: Verdict, threshold: int) -> bool | None:
    """``analysis_result.evidence_verified``: true when a quote was found; false when quotes were given and
    none was found, or when a pushable score has no quote at all; None when there was nothing to check (no
    quotes, a score that could not push anyway)."""
    if verdict.verified:
        return True
    if verdict.quotes or answer.score >= threshold:
        return False
    return None


def record(verdict: Verdict) -> dict[str, Any]:
    """What goes into result_json["checks"]."""
    return {
        "quotes": [q.as_json() for q in verdict.quotes],
        "verified": verdict.verified,
        "unverified": verdict.unverified,
        "consistency": verdict.consistency,
    }
