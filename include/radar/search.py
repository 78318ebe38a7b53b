"""Search over every article and analysis: Chinese text cut into lexemes in Python, matched by PostgreSQL.

PostgreSQL's own parser does not segment Chinese, and pg_trgm is neither in the embedded PostgreSQL nor
useful for two-character words (a trigram index needs three). So the words are made here, when an article or
an analysis is stored, and written as a ``tsvector`` with ``array_to_tsvector`` (lexemes taken as they are,
whatever the server's locale or parser):

- jieba's search-mode words (``宁德时代`` gives ``宁德``, ``时代`` and ``宁德时代``), lower-cased, with tickers
  kept whole (``600519``);
- every pair of adjacent Chinese characters of the title and the opening of the text, so that a query the
  dictionary cuts differently (a company name it does not know) is still found.

A query is cut the same way and all its lexemes must match (``&``). ``make bench-search`` measures on the
labelled articles what each way finds against plain substring search, and how fast a year answers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import cache

MAX_QUERY_CHARS = 100
BIGRAM_CHARS = 4000  # the opening of the text whose character pairs are indexed (the title always)
WORD_CHARS = 30_000  # the text jieba segments
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
def _jieba():  # noqa: ANN202 - the module; imported once per process, quietly (it logs its dictionary load)
    import jieba  # noqa: PLC0415 - 1 s of dictionary loading, only where text is indexed or searched

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _keep(token: str) -> bool:
    """A lexeme worth indexing: two characters or more, with a letter, digit or Chinese character in it."""
    return len(token) >= 2 and _WORD.search(token) is not None and len(token) <= 40


def words(text: str, *, search_mode: bool = True) -> list[str]:
    cut = _jieba().cut_for_search if search_mode else _jieba().cut
    return [t for t in (w.strip().lower() for w in cut(text)) if _keep(t)]


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


def query(text: str) -> tuple[str, list[str]]:
    """A query as tsquery text (every part must match) and the literal terms to mark in snippets.

    Each word of the query must match, either whole or — for a Chinese word of three characters or more,
    which an article may be cut differently — through all of its character pairs
    (``'比亚迪' | '比亚' & '亚迪'``); a Chinese run the dictionary leaves in single characters matches through
    its pairs. Empty when nothing searchable is left (punctuation, single characters).
    """
    lowered = text.strip().lower()
    parts: list[str] = []
    literal: list[str] = []
    for word in dict.fromkeys([*words(lowered, search_mode=False), *_ALNUM_RUN.findall(lowered)]):
        if word in _EXCHANGES:  # 600519.SH: the ticker is the number, however the article writes it
            continue
        literal.append(word)
        if _CJK.search(word) and len(word) > 2:
            parts.append("(" + _quote(word) + " | " + " & ".join(_quote(b) for b in dict.fromkeys(bigrams(word))) + ")")
        else:
            parts.append(_quote(word))
    for run in _CJK_RUN.findall(lowered):
        if len(run) >= 2 and not any(w in run for w in literal if _CJK.search(w)):
            literal.append(run)
            parts.append("(" + " & ".join(_quote(b) for b in dict.fromkeys(bigrams(run))) + ")")
    return " & ".join(dict.fromkeys(parts)), literal


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
