"""The shell blocks of the guide (docs/deployment.md, docs/check.md) as a reader meets them, for tests/test_guide.py.

A ```bash block is a command the reader types, unless the line before it says why the test cannot run it here:
``<!-- guide-test: skip — <reason> -->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SKIP = re.compile(r"<!-- guide-test: skip — (.+?) -->")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    section: str  # the nearest heading above it
    text: str
    skip: str | None  # why the test does not run it, or None

    def where(self) -> str:
        return f"{self.path.name}:{self.line} ({self.section})"


def shell_blocks(path: Path) -> list[Block]:
    """Every ```bash block of ``path``, in order, with the skip reason written just before it."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if line.lstrip().startswith("```"):  # a block inside a list item is indented
            indent = len(line) - len(line.lstrip())
            end = next(j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("```"))
            if line.strip() == "```bash":
                before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                reason = SKIP.fullmatch(before.strip())
                found.append(Block(path, i + 1, section, "\n".join(x[indent:] for x in lines[i + 1:end]) + "\n",
                                   reason.group(1) if reason else None))
            i = end
        i += 1
    return found


def skip_marks(path: Path) -> list[int]:
    """The lines of every skip mark, whether or not a ```bash block follows it."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if SKIP.search(line)]
