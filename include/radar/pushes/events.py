"""One entry per real-world event: analyses of one announcement, company action or data release written up by
different accounts within the window over which an event can still be news (``event_window_hours``, 72 h) are
grouped, so the reader gets one entry and one push, whenever a rewrite arrives in it.

No LLM call: the title (twice) and the text's opening, without an account's repeated paragraphs, cut into
character 2- and 3-grams weighted by TF-IDF. Two articles of different accounts within the window (of each other
and of their event's first article) are one event at cosine ``SAME``, or a lower bar with figures (``80亿``) or
entities in common (``FIGURES_SIM``, ``FIGURE_ENTITY_SIM``, ``RELATED``, ``ENTITY_FIGURES_SIM``: a rewrite keeps
the company and its figures, not the wording); never when both name tickers and share none (thresholds: ``make
bench-grouping``). Grouped articles keep their event; the others join their best match or start one; a repost
joins the event of the analysis it reuses."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

SAME = 0.40  # cosine at or above which two articles are one event
FIGURES_SIM = 0.10  # ... or at or above which two shared figures make them one
FIGURE_ENTITY_SIM = 0.08  # ... or one shared figure and one shared entity
RELATED = 0.25  # ... or one shared entity alone
ENTITY_FIGURES_SIM = 0.02  # ... or one shared entity and two shared figures
WINDOW = timedelta(hours=72)  # event_window_hours' default
TEXT_CHARS = 1200
MIN_BOILERPLATE = 8  # a paragraph this long repeated by one account is its boilerplate

_KEEP = re.compile(r"[\w%]")  # letters (CJK included), digits and percent signs carry the facts
_TICKER = re.compile(r"(?<![0-9])(\d{6}|\d{4,5}(?=\.?hk))(?![0-9])")
_BRACKETS = re.compile(r"[()（）\[\]【】]")
# a figure: a number with its unit; a bare number counts when it has a decimal point or three digits or more
_FIGURE = re.compile(r"(\d+(?:\.\d+)?)\s*(%|万亿|亿|万|千|元|gwh|mwh|kwh|gw|mw|倍|bp|基点|个百分点|吨|辆|台|家|股|nm)?(?=(.?))")
_DATE_UNIT = "年月日号时点分周季"


@dataclass(frozen=True)
class Doc:
    """One analysed article as grouping sees it."""

    key: int  # the analysis id
    account: str
    published_at: datetime
    title: str
    text: str
    entities: frozenset[str] = frozenset()
    event: int | None = None  # set when already grouped
    reuses: int | None = None  # the analysis a repost reuses
    event_started: datetime | None = None  # when the first article of its event was published (grouped docs)

    @property
    def figures(self) -> frozenset[str]:
        return figures_of(f"{self.title}\n{self.text[:TEXT_CHARS]}")


@dataclass(frozen=True)
class Match:
    event: int
    similarity: float | None = None  # to ``partner``; None for an event's first article
    partner: int | None = None
    shared: tuple[str, ...] = field(default_factory=tuple)  # entities both name
    figures: tuple[str, ...] = field(default_factory=tuple)  # figures both state

    def note(self, partner_title: str = "") -> str | None:
        """Why the article is in its event, for the analysis page."""
        if self.partner is None:
            return None
        if self.similarity is None:
            return "转载：与所复用的分析为同一篇文章"
        why = f"与《{partner_title}》内容相似度 {self.similarity:.2f}" if partner_title else \
            f"与分析 #{self.partner} 内容相似度 {self.similarity:.2f}"
        return (why + (f"，共同数字：{'、'.join(self.figures)}" if self.figures else "")
                + (f"，共同标的：{'、'.join(self.shared)}" if self.shared else ""))


def entities_of(result_json: Any) -> list[str]:
    """The entities the model extracted: each opportunity's name and targets."""
    found: list[str] = []
    opportunities = result_json.get("opportunities") if isinstance(result_json, dict) else None
    for o in opportunities if isinstance(opportunities, list) else []:
        if not isinstance(o, dict):
            continue
        targets = o.get("targets") if isinstance(o.get("targets"), list) else []
        found += [str(t) for t in [o.get("name"), *targets] if isinstance(t, str) and t.strip()]
    return found


def entity_keys(entities: Iterable[str]) -> frozenset[str]:
    """Comparable forms of entity names: ``宁德时代(300750.SZ)`` gives ``宁德时代`` and ``300750``."""
    keys: set[str] = set()
    for entity in entities:
        text = unicodedata.normalize("NFKC", str(entity)).lower()
        keys.update(_TICKER.findall(text))
        for part in _BRACKETS.split(text):
            part = _TICKER.sub("", part)
            part = re.sub(r"\.(sz|sh|hk|bj)\b", "", part)
            part = "".join(_KEEP.findall(part))
            if len(part) >= 2 and not part.isdigit():
                keys.add(part)
    return frozenset(keys)


def figures_of(text: str) -> frozenset[str]:
    """The specific figures an article states (``80亿``, ``3.45%``, ``50gwh``, ``300750``), not dates or years:
    articles about one event repeat its figures whatever their wording."""
    found = set()
    for m in _FIGURE.finditer(unicodedata.normalize("NFKC", text).lower().replace(",", "")):
        number, unit, after = m.group(1), m.group(2) or "", m.group(3)
        if not unit and (after in _DATE_UNIT or ("." not in number and len(number) < 3)
                         or re.fullmatch(r"(19|20)\d\d", number)):
            continue
        found.add(number + unit)
    return frozenset(found)


def _normalise(text: str) -> str:
    return "".join(_KEEP.findall(unicodedata.normalize("NFKC", text).lower()))


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.splitlines() if p.strip()]


def comparable_texts(docs: Sequence[Doc]) -> list[str]:
    """What is compared of each article: its title twice and the start of its text, without the paragraphs
    its account repeats in other articles here."""
    seen = Counter((d.account, _normalise(p)) for d in docs for p in set(_paragraphs(d.text)))
    texts = []
    for d in docs:
        body = "\n".join(p for p in _paragraphs(d.text)
                         if len(p) < MIN_BOILERPLATE or seen[(d.account, _normalise(p))] < 2)
        texts.append(_normalise(f"{d.title}\n{d.title}\n{body[:TEXT_CHARS]}"))
    return texts


def similarities(docs: Sequence[Doc], rows: Sequence[int] | None = None) -> Any:
    """The cosine matrix (numpy) of the TF-IDF character 2/3-gram vectors of the docs at ``rows`` (all by
    default) against every doc: len(rows) × len(docs), so a pass over a few new articles stays small."""
    import numpy  # only where grouping runs

    texts = comparable_texts(docs)
    rows = list(range(len(docs))) if rows is None else list(rows)
    vectors = tfidf(texts)
    if vectors is None:  # no text has two characters to compare: nothing is similar
        return numpy.zeros((len(rows), len(docs)))
    return (vectors[rows] @ vectors.T).toarray()


_SPACES = re.compile(r"\s\s+")


def tfidf(texts: Sequence[str]) -> Any:
    """L2-normalised TF-IDF vectors (a scipy CSR matrix, one row per text) of character 2- and 3-grams with
    sublinear term frequency and smoothed idf: what scikit-learn's ``TfidfVectorizer(analyzer="char",
    ngram_range=(2, 3), sublinear_tf=True, lowercase=False)`` computes (a test holds them equal), without
    its import (2.8 s cold, against 0.7 s for scipy.sparse) in the task that groups. None without any n-gram."""
    import numpy
    import scipy.sparse

    vocabulary: dict[str, int] = {}
    indptr, indices, counts = [0], [], []
    for text in texts:
        text = _SPACES.sub(" ", text)
        grams = Counter(text[i : i + n] for n in (2, 3) for i in range(len(text) - n + 1))
        for gram, count in grams.items():
            indices.append(vocabulary.setdefault(gram, len(vocabulary)))
            counts.append(count)
        indptr.append(len(indices))
    if not vocabulary:
        return None
    matrix = scipy.sparse.csr_matrix((numpy.array(counts, dtype=numpy.float64), indices, indptr),
                                     shape=(len(texts), len(vocabulary)))
    matrix.data = 1.0 + numpy.log(matrix.data)
    frequency = numpy.bincount(matrix.indices, minlength=len(vocabulary))
    matrix = matrix @ scipy.sparse.diags(numpy.log((1.0 + len(texts)) / (1.0 + frequency)) + 1.0)
    norms = numpy.sqrt(numpy.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return scipy.sparse.csr_matrix(scipy.sparse.diags(1.0 / norms) @ matrix)


@dataclass(frozen=True)
class Rule:
    """When two articles of different accounts, at most ``WINDOW`` apart, are one event."""

    same: float = SAME
    figures_sim: float = FIGURES_SIM
    figure_entity_sim: float = FIGURE_ENTITY_SIM
    related: float = RELATED
    use_figures: bool = True
    use_entities: bool = True
    ticker_conflict: bool = True  # both name tickers, none in common: never one event
    figure_conflict: bool = True  # both state two figures or more, none in common: one event only at ``same``
    entity_figures_sim: float | None = ENTITY_FIGURES_SIM  # None: no pair holds on an entity and figures alone

    @property
    def floor(self) -> float:
        """No pair below this similarity can hold."""
        both = self.use_figures and self.use_entities and self.entity_figures_sim is not None
        return min([self.same, *([self.figures_sim, self.figure_entity_sim] if self.use_figures else []),
                    *([self.related] if self.use_entities else []), *([self.entity_figures_sim] if both else [])])

    def holds(self, similarity: float, entities: int, figures: int) -> bool:
        """``figures``: those both state that are not tickers (a ticker is an entity)."""
        entities = entities if self.use_entities else 0
        figures = figures if self.use_figures else 0
        return (similarity >= self.same or (figures >= 2 and similarity >= self.figures_sim)
                or (figures >= 1 and entities >= 1 and similarity >= self.figure_entity_sim)
                or (entities >= 1 and similarity >= self.related)
                or (self.entity_figures_sim is not None and figures >= 2 and entities >= 1
                    and similarity >= self.entity_figures_sim))


def group(docs: Sequence[Doc], sims: Any = None, rule: Rule = Rule(), window: timedelta = WINDOW) -> dict[int, Match]:
    """The event of every doc not yet grouped (see the module's docstring); grouped docs are left out.

    ``sims`` (docs × docs) and ``rule`` are for the benchmark, which compares other measures and thresholds."""
    new = [i for i, d in enumerate(docs) if d.event is None]
    if not new:
        return {}
    started: dict[int, datetime] = {}  # event -> when its first article was published
    for d in docs:
        if d.event is not None:
            first = min(d.published_at, d.event_started or d.published_at)
            started[d.event] = min(started.get(d.event, first), first)
    if sims is None:  # only the new docs' rows: len(new) × len(docs)
        sims, index = similarities(docs, new), {docs[i].key: row for row, i in enumerate(new)}
    else:
        index = {d.key: i for i, d in enumerate(docs)}
    position = {d.key: i for i, d in enumerate(docs)}
    figures = [d.figures for d in docs]
    event: dict[int, int] = {d.key: d.event for d in docs if d.event is not None}
    out: dict[int, Match] = {}
    for d in sorted((d for d in docs if d.event is None), key=lambda d: (d.published_at, d.key)):
        if d.reuses is not None and d.reuses in event:
            match = Match(event[d.reuses], None, d.reuses)
        else:
            match = (_best(position[d.key], docs, sims[index[d.key]], figures, event, started, rule, window)
                     or Match(d.key))
        event[d.key] = match.event
        started[match.event] = min(started.get(match.event, d.published_at), d.published_at)
        out[d.key] = match
    return out


def _best(i: int, docs: Sequence[Doc], row: Any, figures: list[frozenset[str]], event: dict[int, int],
          started: dict[int, datetime], rule: Rule, window: timedelta) -> Match | None:
    doc, best, best_key = docs[i], None, (0, 0.0)
    tickers = {e for e in doc.entities if e.isdigit()}
    for j in (row >= rule.floor).nonzero()[0]:  # the few candidates, not every pair
        other, similarity = docs[j], float(row[j])
        if (other.key == doc.key or other.key not in event or (doc.account and other.account == doc.account)
                or abs(other.published_at - doc.published_at) > window
                or abs(doc.published_at - started.get(event[other.key], other.published_at)) > window):
            continue
        others_tickers = {e for e in other.entities if e.isdigit()}
        if rule.ticker_conflict and tickers and others_tickers and not tickers & others_tickers:
            continue
        shared = tuple(sorted(doc.entities & other.entities))
        same_figures = tuple(sorted(figures[i] & figures[j] - tickers - others_tickers))  # a ticker is an entity
        if not rule.holds(similarity, len(shared), len(same_figures)):
            continue
        if (rule.figure_conflict and not same_figures and similarity < rule.same
                and min(len(figures[i] - tickers), len(figures[j] - others_tickers)) >= 2):
            continue  # both state figures, none the same: two stories (one company's buyback and its dividend)
        # the facts first: of two matches, the one stating more of the same figures (a rewrite's own news, not
        # another story of the company told in the same words), then the closer text
        if best is None or (len(same_figures), similarity) > best_key:
            best, best_key = Match(event[other.key], round(similarity, 3), other.key, shared[:5], same_figures[:5]), \
                (len(same_figures), similarity)
    return best


# --------------------------------------------------------------------------------- entries of one event


def verified_quotes(analysis: dict[str, Any]) -> int:
    checks = analysis.get("result_json", {}).get("checks") if isinstance(analysis.get("result_json"), dict) else None
    value = checks.get("verified") if isinstance(checks, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def lead_key(analysis: dict[str, Any]) -> tuple[Any, ...]:
    """The order in which an event's analyses lead it: verified evidence first, then fresh analyses before
    reposts (a repost is never news), then the rank (the score boosted by the reader's focus and feedback,
    ranking.py; the score where none was computed), then the score, the number of verified quotes, the oldest."""
    return (analysis.get("evidence_verified") is False, bool(analysis.get("reused_from_id")),
            -int(analysis.get("rank_score", analysis["score"])), -int(analysis["score"]),
            -verified_quotes(analysis), int(analysis["id"]))


def event_of(analysis: dict[str, Any]) -> int:
    """An analysis's event (its own id until grouping has seen it)."""
    return analysis.get("event_id") or analysis["id"]


@dataclass
class Entry:
    """One real-world event as the reader sees it: the lead analysis and every analysis of the event."""

    lead: dict[str, Any]
    members: list[dict[str, Any]]  # the lead first

    @property
    def event(self) -> int:
        return event_of(self.lead)

    @property
    def others(self) -> list[dict[str, Any]]:
        return self.members[1:]

    @property
    def sources(self) -> list[str]:
        """The accounts that wrote about it, the lead's first, each once."""
        return list(dict.fromkeys(m.get("mp_name") or "" for m in self.members))


def entries(analyses: Iterable[dict[str, Any]]) -> list[Entry]:
    """The analyses folded by event, each event led by its best-evidenced analysis; best entries first."""
    by_event: dict[int, list[dict[str, Any]]] = {}
    for a in analyses:
        by_event.setdefault(event_of(a), []).append(a)
    folded = [Entry(members[0], members) for members in (sorted(m, key=lead_key) for m in by_event.values())]
    return sorted(folded, key=lambda e: lead_key(e.lead))


# ------------------------------------------------------------------------------------ grouping the new ones

MAX_PER_PASS = 500  # new analyses per pass: with their 72 h neighbours, a few MB of similarities
PASS_SPAN = timedelta(days=1)


def group_new(connect: Any, window: timedelta = WINDOW) -> int:
    """Group every analysis grouping has not seen (under an advisory lock, so two slots never race) among the
    grouped ones within ``window`` of them, whichever slot or day grouped those; returns how many were grouped.
    ``connect``: db.connect-like."""
    from include.radar import store  # the pure part above needs no database

    total = 0
    while True:
        with connect() as conn:
            store.events.lock_grouping(conn)
            batch = store.events.ungrouped(conn, MAX_PER_PASS)
            if not batch:
                return total
            # a day of publications per pass: the neighbours fetched stay those of a few days, even when an
            # old article comes back (retry_failed) among new ones
            new = [r for r in batch if r["published_at"] <= batch[0]["published_at"] + PASS_SPAN]
            rows = store.events.grouped_near(conn, new, window) + new
            docs = [_doc(r) for r in rows]
            matches = group(docs, window=window)
            titles = {r["id"]: r["title"] for r in rows}
            total += store.events.set_events(conn, ((key, m.event, m.note(titles.get(m.partner, "")))
                                             for key, m in matches.items()))
        if len(batch) < MAX_PER_PASS and len(new) == len(batch):
            return total


def _doc(row: dict[str, Any]) -> Doc:
    return Doc(key=row["id"], account=row["account"] or "", published_at=row["published_at"],
               title=row["title"] or "", text=row["clean_text"] or "",
               entities=entity_keys(entities_of(row["result_json"])), event=row["event_id"],
               reuses=row["reused_from_id"], event_started=row.get("event_started"))
