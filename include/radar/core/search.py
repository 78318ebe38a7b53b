"""Search over every article and analysis: Chinese text cut into lexemes in Python, matched by PostgreSQL.

PostgreSQL does not segment Chinese, and pg_trgm (missing from the embedded server) needs three characters. So
the words are made here when an article or analysis is stored, and written with ``array_to_tsvector``
(whatever the server's locale): jieba's search-mode words (rjieba's cut), lower-cased, tickers whole; and
every pair of adjacent Chinese characters of the title and the text's opening, so that a name the dictionary
cuts differently is still found. A query is cut the same way and all its lexemes must match. ``make bench-search``
measures what each way finds and how fast.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import cache

MAX_QUERY_CHARS = 100
BIGRAM_CHARS = 4000  # the opening of the text whose character pairs are indexed (the title always)
WORD_CHARS = 30_000  # the text cut into words
QUERY_MIN_FREQ = 20  # the query cutter's dictionary: jieba's words at least this frequent (_query_cutter)
# PostgreSQL refuses a lexeme over 2047 bytes ("word is too long") and fails the whole insert: an article
# with one endless word (a hostile body) would fail its slot's ingest. No query is that long: such a word is
# left out of the index, the article is stored
MAX_LEXEME_BYTES = 2046
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[0-9a-z\u3400-\u9fff\uf900-\ufaff]")
_ALNUM_RUN = re.compile(r"[0-9a-z]{2,}")
_EXCHANGES = frozenset({"sh", "sz", "bj", "hk", "ss"})


@cache
def _segmenter():  # rjieba: jieba's dictionary and cuts in Rust, 0.1 s to load and 0.4 ms an article where
    # jieba's Python took 0.8 s and 8 ms (make bench-slot), the same words (make bench-search)
    import rjieba

    return rjieba


def _keep(token: str) -> bool:
    """A lexeme worth indexing: two characters or more, with a letter, digit or Chinese character in it."""
    return len(token) >= 2 and _WORD.search(token) is not None and len(token) <= 40


def words(text: str, *, search_mode: bool = True) -> list[str]:
    """jieba's words of ``text`` (its search mode: long words and their parts), lower-cased, worth indexing."""
    cut = _segmenter().cut_for_search if search_mode else _segmenter().cut
    return [t for t in (w.strip().lower() for w in cut(text, True)) if _keep(t)]


def bigrams(text: str) -> list[str]:
    return [run[i:i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)]


def lexemes(title: str, text: str, extra: Iterable[str] = ()) -> list[str]:
    """The lexemes of one article (its title, text and ``extra``: an analysis's summary and targets)."""
    head = f"{title or ''}\n{(text or '')[:WORD_CHARS]}\n" + "\n".join(extra)
    found = set(words(head))
    found.update(_ALNUM_RUN.findall(head.lower()))
    found.update(bigrams(f"{title or ''}\n{(text or '')[:BIGRAM_CHARS]}\n" + "\n".join(extra)))
    return sorted(w for w in found if len(w) * 4 <= MAX_LEXEME_BYTES or len(w.encode()) <= MAX_LEXEME_BYTES)


def _quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


@cache
def _query_cutter():  # a jieba Tokenizer over the frequent words only
    """The cutter of queries: jieba with the words of its dictionary used at least QUERY_MIN_FREQ times (80k of
    349k). Where it cuts a name more finely than the full dictionary would, the pieces and the character pairs
    that cover what is left still match the article (see :func:`query`); and it costs the api-server, where the
    pages cut queries, about 20 MB instead of the full dictionary's 70 (``make bench-search`` measures both)."""
    import io

    import jieba

    jieba.setLogLevel(logging.WARNING)
    with open(jieba.get_dict_file().name, "rb") as f:
        frequent = b"".join(line for line in f if int(line.split(b" ", 2)[1]) >= QUERY_MIN_FREQ)
    cutter = jieba.Tokenizer()
    cutter.FREQ, cutter.total = cutter.gen_pfdict(io.BytesIO(frequent))
    cutter.initialized = True
    return cutter


def _alternatives(word: str) -> str:
    """A query word as tsquery: a Chinese word of three characters or more matches whole or through all of its
    character pairs (an article may have been cut differently); anything else as it is."""
    if _CJK.search(word) and len(word) > 2:
        return "(" + _quote(word) + " | " + " & ".join(_quote(b) for b in dict.fromkeys(bigrams(word))) + ")"
    return _quote(word)


def query(text: str, *, cutter=None) -> tuple[str, list[str]]:  # a jieba Tokenizer
    """A query as tsquery text (every part must match) and the literal terms to mark in snippets.

    The query is cut into words (``_query_cutter``; ``cutter`` for the benchmark's comparison): each word of two
    characters or more must match (:func:`_alternatives`), and every Chinese character no such word covers —
    a name the dictionary splits into single characters, ``信达生物`` as 信/达/生物 — must match through the
    character pair it starts (or, last in its run, ends): without it 信达生物 would find every article saying
    生物. A Chinese run of three characters or more also matches whole (``'比亚迪' | '比亚' & '亚迪'``): the
    articles' own cut may hold it as one word. Tickers are matched as numbers (``600519.SH`` is ``600519``).
    Empty when nothing searchable is left (punctuation, one character).
    """
    lowered = text.strip().lower()
    runs = [(m.start(), m.end()) for m in _CJK_RUN.finditer(lowered)]
    per_run: dict[int, list[str]] = {i: [] for i in range(len(runs))}
    parts: list[str] = []
    literal: list[str] = []
    covered: set[int] = set()
    for word, start, end in (cutter or _query_cutter()).tokenize(lowered):
        if not _keep(word) or word in _EXCHANGES:  # 600519.SH: the ticker is the number
            continue
        covered.update(range(start, end))
        literal.append(word)
        inside = next((i for i, (a, b) in enumerate(runs) if a <= start and end <= b), None)
        (parts if inside is None else per_run[inside]).append(_alternatives(word))
    for match in _ALNUM_RUN.finditer(lowered):
        if match.group() not in _EXCHANGES and not covered.issuperset(range(match.start(), match.end())):
            literal.append(match.group())
            parts.append(_quote(match.group()))
    for i, (at, stop) in enumerate(runs):
        run = lowered[at:stop]
        for pos in range(at, stop):
            if pos in covered or len(run) < 2:
                continue
            pair = (pos, pos + 2) if pos + 1 < stop else (pos - 1, pos + 1)
            covered.update(range(*pair))
            per_run[i].append(_quote(lowered[pair[0]:pair[1]]))
        units = list(dict.fromkeys(per_run[i]))
        if len(run) > 2 and units != [_alternatives(run)]:
            literal.append(run)
            units = [f"({_quote(run)} | {' & '.join(units)})"] if units else []
        parts.extend(units)
    return " & ".join(dict.fromkeys(parts)), list(dict.fromkeys(literal))


def highlight(text: str, terms: list[str], width: int = 60) -> list[tuple[str, bool]]:
    """A snippet of ``text`` around its first match, as (segment, is_match) pairs for the template to escape
    and mark; the start of the text when nothing matches literally."""
    if not text:
        return []
    lower = text.lower()
    literal = sorted({t for t in terms if t}, key=len, reverse=True)
    hits = [lower.find(t) for t in literal if lower.find(t) >= 0]
    start = max(0, min(hits) - width // 3) if hits else 0
    snippet = text[start:start + width]
    if not literal:
        return [(snippet, False)]
    pattern = re.compile("|".join(re.escape(t) for t in literal), re.IGNORECASE)
    parts: list[tuple[str, bool]] = [("…", False)] if start else []
    at = 0
    for match in pattern.finditer(snippet):
        if match.start() > at:
            parts.append((snippet[at:match.start()], False))
        parts.append((match.group(0), True))
        at = match.end()
    parts.append((snippet[at:], False))
    if start + width < len(text):
        parts.append(("…", False))
    return [p for p in parts if p[0]]
