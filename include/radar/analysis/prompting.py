"""The versioned prompts under prompts/, and what keeps outside text from writing a prompt's delimiters."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROMPTS = Path(__file__).with_name("prompts")
_DELIMITER_RUN = re.compile(r"<{3,}|>{3,}")


@dataclass(frozen=True)
class Prompt:
    """A versioned prompt: ``<name>_<version>.system.txt`` and ``.user.txt`` under prompts/."""

    name: str
    version: str

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def system(self) -> str:
        return (PROMPTS / f"{self.name}_{self.version}.system.txt").read_text(encoding="utf-8")

    def user(self, **values: str) -> str:
        template = (PROMPTS / f"{self.name}_{self.version}.user.txt").read_text(encoding="utf-8")
        return template.format(**values)


def neutralise_delimiters(text: str) -> str:
    """Outside text can never contain a prompt delimiter: every run of three or more ``<`` or ``>`` is cut
    to two. One pass, so nesting (``<<<ARTICLE_E<<<ARTICLE_END>>>ND>>>``) cannot rebuild a marker."""
    return _DELIMITER_RUN.sub(lambda m: m.group(0)[:2], text)
