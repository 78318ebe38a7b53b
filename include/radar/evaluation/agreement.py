"""How far two set-ups agree, and how well a score separates the reader's 👍 from 👎: pure statistics.

- *rank correlation*: Spearman's rho, the Pearson correlation of the two score lists' ranks (ties share the mean
  of the ranks they span), so a candidate that scores every article 10 points lower still agrees perfectly;
- *AUC*: the chance that an article the reader liked scores above one they disliked (a tie counts a half), the
  Mann–Whitney statistic. From ``MIN_VOTES`` verdicts of each kind, its interval is Hanley & McNeil's (1982)
  normal approximation, clipped to [0, 1]; below, no interval (the approximation is not honest there) but the
  exact chance that scores in a random order separate them as well or better (2 👍 against 2 👎: 1 in 6);
- *the confusion matrix* of the two "opportunity or not" calls, and the share of agreeing calls;
- *overlap* of two sets of instruments: Jaccard's |A ∩ B| / |A ∪ B|.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959964
MIN_VOTES = 10  # verdicts of each kind (👍 and 👎) before an AUC says anything


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the mean of the ranks they span (``[10, 20, 20, 30]`` → ``[1, 2.5, 2.5, 4]``)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """None when it is undefined: fewer than two pairs, or a list without any spread."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    vx = sum((x - mx) ** 2 for x in xs)
    vy = sum((y - my) ** 2 for y in ys)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    return pearson(ranks(xs), ranks(ys))


def mean_abs_diff(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if not xs or len(xs) != len(ys):
        return None
    return sum(abs(x - y) for x, y in zip(xs, ys, strict=True)) / len(xs)


@dataclass(frozen=True)
class Auc:
    """How well a score separates liked from disliked articles."""

    value: float | None
    low: float | None  # the interval, from MIN_VOTES of each kind only
    high: float | None
    liked: int
    disliked: int
    chance: float | None = None  # below MIN_VOTES: the chance a random order separates them as well or better

    @property
    def conclusive(self) -> bool:
        return self.value is not None and min(self.liked, self.disliked) >= MIN_VOTES


def auc(liked: Sequence[float], disliked: Sequence[float], z: float = Z95) -> Auc:
    """The Mann–Whitney AUC of the scores of liked over disliked articles: with Hanley & McNeil's interval from
    ``MIN_VOTES`` of each kind, else with the exact chance of doing as well at random."""
    p, n = len(liked), len(disliked)
    if p == 0 or n == 0:
        return Auc(None, None, None, p, n)
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in liked for b in disliked)
    value = wins / (p * n)
    if min(p, n) < MIN_VOTES:
        counts = u_counts(min(p, n), max(p, n))
        return Auc(value, None, None, p, n, sum(counts[math.ceil(wins - 1e-9):]) / math.comb(p + n, p))
    a = min(max(value, 0.5 / (p * n)), 1 - 0.5 / (p * n))
    q1 = a / (2 - a)
    q2 = 2 * a * a / (1 + a)
    var = (a * (1 - a) + (p - 1) * (q1 - a * a) + (n - 1) * (q2 - a * a)) / (p * n)
    se = math.sqrt(max(var, 0.0))
    return Auc(value, max(0.0, value - z * se), min(1.0, value + z * se), p, n)


def u_counts(m: int, n: int) -> list[int]:
    """How many of the C(m + n, m) orders of two groups (m and n, no ties) put exactly U pairs the first group's
    way, U = 0 … m·n: the coefficients of the Gaussian binomial [m + n choose m], the product over k = 1 … m of
    (1 − q^(n + k)) / (1 − q^k), multiplied and divided in place."""
    poly = [1] + [0] * (m * n + m + n)
    for k in range(1, m + 1):
        for i in range(len(poly) - 1, n + k - 1, -1):
            poly[i] -= poly[i - n - k]
        for i in range(k, len(poly)):
            poly[i] += poly[i - k]
    return poly[: m * n + 1]


@dataclass(frozen=True)
class Confusion:
    """Opportunity or not, the current set-up's call against the candidate's."""

    both: int = 0
    only_current: int = 0
    only_candidate: int = 0
    neither: int = 0

    @property
    def total(self) -> int:
        return self.both + self.only_current + self.only_candidate + self.neither

    @property
    def agreement(self) -> float | None:
        return (self.both + self.neither) / self.total if self.total else None


def confusion(calls: Sequence[tuple[bool, bool]]) -> Confusion:
    """``calls``: (current says opportunity, candidate says opportunity) per article."""
    return Confusion(
        both=sum(1 for a, b in calls if a and b), only_current=sum(1 for a, b in calls if a and not b),
        only_candidate=sum(1 for a, b in calls if b and not a), neither=sum(1 for a, b in calls if not a and not b),
    )


def share(matches: Sequence[bool]) -> float | None:
    return sum(matches) / len(matches) if matches else None


def jaccard(a: set[str], b: set[str]) -> float | None:
    """None when neither set names anything (no overlap to measure)."""
    union = a | b
    return len(a & b) / len(union) if union else None
