"""What the tests of pushes and pages share about how a line reads: the characters that reverse, reorder or
reshape the rest of a line (core.text.in_order drops them), and the check that none is left."""

from __future__ import annotations

import unicodedata

# the embeddings, overrides and isolates, the invisible strong marks (LRM, RLM, ALM, the Syriac abbreviation
# mark), a deprecated format control (symmetric swapping, national digit shapes) and an interlinear annotation mark
REORDERING = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
              "\u200f", "\u061c", "\u070f", "\u206a", "\u206e", "\ufff9"]
REORDERING_IDS = [f"U+{ord(c):04X}" for c in REORDERING]
_DIRECTING = ("LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI", "R", "AL")


def reads_in_order(text: str) -> bool:
    """No character left in ``text`` that makes a left-to-right line read otherwise than its characters' order."""
    return not any(c in REORDERING or unicodedata.bidirectional(c) in _DIRECTING for c in text)
