"""A push message and its forms: plain text, Markdown (CommonMark: apprise turns it into each channel's own
dialect) and HTML (e-mail), with HTML as Telegram and e-mail need it (TELEGRAM_HTML, MAIL_HTML). Pure.

A message is the radar's structure around text that came from articles and the LLM: lines first, then blocks
(one per opportunity: a headline and its lines, and its own page), then what it leaves out and notes, then its
link. Every piece of text is defanged (decide.defang: no URL or host name a channel would link) and escaped for
the form, so ``**紧急**`` or ``[点此领取](…)`` stay text; the only links are the radar's own. A message that does
not fit is cut between blocks, never inside one, and says 「完整内容见链接」; the link is always whole.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from include.radar.pushes.decide import defang

TEXT, MARKDOWN, HTML = "text", "markdown", "html"  # apprise's NotifyFormat values
# HTML as two channels need it, declared HTML to apprise: Telegram's breaks its lines with newlines (it has no
# <br>, and apprise's reduction of its HTML joins <br><br> into one break: the items would run together); an
# e-mail's writes each link's address out (apprise derives the text/plain part from the HTML, dropping hrefs)
TELEGRAM_HTML, MAIL_HTML = "html-telegram", "html-mail"
FORMATS = (TEXT, MARKDOWN, HTML, TELEGRAM_HTML, MAIL_HTML)
CUT_NOTE = "完整内容见链接"
MD_BREAK = "  \n"  # a hard line break in CommonMark (a bare newline joins the lines into one paragraph)


@dataclass(frozen=True)
class Block:
    """One item: its headline (bold where the form has bold), its lines, and its own page (a link in Markdown
    and HTML; plain text keeps the message's one link)."""

    head: str
    lines: tuple[str, ...] = ()
    link: str = ""
    spare: tuple[str, ...] = ()  # lines after ``lines`` that go first when the message does not fit (fitted)


@dataclass(frozen=True)
class Message:
    title: str
    lines: list[str]  # first; shortened only when nothing else fits
    link: str  # the message's page: never shortened
    blocks: tuple[Block, ...] = ()
    more: int = 0  # items beyond the blocks: with the blocks a channel's size leaves out, 「另有 N 条」 ...
    more_link: str = ""  # ... and where they are (a link in Markdown and HTML)
    notes: tuple[str, ...] = ()  # last, before the link
    link_label: str = "查看详情"  # the link's text in Markdown and HTML
    shown: tuple[int, ...] = ()  # the analyses the message tells of (each item's lead): never news again


# Markdown: what CommonMark (and the dialects apprise converts it to) would read as markup anywhere in a line,
# and what opens a heading, a list, a quote, a rule or a setext underline at its start
_MD_INLINE = re.compile(r"([\\`*_\[\]<>&~|])")
_MD_LINE_START = re.compile(r"^(\s*)([#+\-=>]|\d+[.)])")


def md_escape(text: str) -> str:
    """``text`` as CommonMark text that renders as itself: no emphasis, link, code, HTML, entity or block."""
    text = _MD_INLINE.sub(r"\\\1", text)
    return _MD_LINE_START.sub(lambda m: m[1] + m[2][:-1] + "\\" + m[2][-1], text)


def _md_url(url: str) -> str:
    return url.replace("<", "%3C").replace(">", "%3E").replace(" ", "%20").replace("\n", "")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@dataclass(frozen=True)
class _Form:
    text: Callable[[str], str]  # one line of text, escaped
    bold: Callable[[str], str]
    link: Callable[[str, str], str]  # (label, url)
    line_break: str
    paragraph: Callable[[list[str]], str]  # the lines of one part, joined
    between: str  # between parts
    final: Callable[[str, str], str]  # (label, url): the message's link


def _html_link(label: str, url: str) -> str:
    return f'<a href="{html.escape(url, quote=True)}">{html.escape(label)}</a>'


def _mail_link(label: str, url: str) -> str:
    return f'{html.escape(label)} <a href="{html.escape(url, quote=True)}">{html.escape(url)}</a>'


def _html_text(text: str) -> str:
    return html.escape(defang(_one_line(text)), quote=False)


def _html_bold(text: str) -> str:
    return f"<b>{text}</b>" if text else text


_FORMS = {
    TEXT: _Form(lambda t: defang(_one_line(t)), lambda t: t, lambda label, url: "", "\n",
                lambda lines: "\n".join(lines), "\n\n", lambda label, url: url),
    MARKDOWN: _Form(lambda t: md_escape(defang(_one_line(t))), lambda t: f"**{t}**" if t else t,
                    lambda label, url: f"[{md_escape(label)}](<{_md_url(url)}>)", MD_BREAK,
                    lambda lines: MD_BREAK.join(lines), "\n\n", lambda label, url: f"[{md_escape(label)}](<{_md_url(url)}>)"),
    HTML: _Form(_html_text, _html_bold, _html_link, "<br>\n", lambda lines: "<br>\n".join(lines), "<br>\n<br>\n",
                _html_link),
    TELEGRAM_HTML: _Form(_html_text, _html_bold, _html_link, "\n", lambda lines: "\n".join(lines), "\n\n", _html_link),
    MAIL_HTML: _Form(_html_text, _html_bold, _mail_link, "<br>\n", lambda lines: "<br>\n".join(lines), "<br>\n<br>\n",
                     _mail_link),
}


def render(message: Message, form: str, blocks: int | None = None, spared: int | None = None) -> str:
    """The body of ``message`` in ``form`` (one of FORMATS) with its first ``blocks`` blocks (all by
    default), the first ``spared`` of them with their spare lines (all by default); fewer blocks than all adds
    「完整内容见链接」. The title is not part of it (push.fit shortens it)."""
    f = _FORMS[form]
    shown = message.blocks if blocks is None else message.blocks[:blocks]
    parts = []
    if message.lines:
        parts.append(f.paragraph([f.text(line) for line in message.lines]))
    for position, block in enumerate(shown):
        kept = block.lines + (block.spare if spared is None or position < spared else ())
        lines = [f.bold(f.text(block.head)), *(f.text(line) for line in kept)]
        own = f.link("详情", block.link) if block.link and block.link != message.link else ""
        if own:
            lines[-1] += " · " + own
        parts.append(f.paragraph([line for line in lines if line]))
    trailer = []
    left_out = message.more + len(message.blocks) - len(shown)
    if left_out:
        where = f.link("当日日报", message.more_link) if message.more_link else ""
        trailer.append(f.text(f"另有 {left_out} 条") + (" · " + where if where else ""))
    trailer += [f.text(note) for note in message.notes]
    if len(shown) < len(message.blocks):
        trailer.append(f.text(CUT_NOTE))
    if trailer:
        parts.append(f.paragraph(trailer))
    end = f.final(message.link_label, message.link)
    body = f.between.join(p for p in parts if p)
    return f"{body}{f.line_break if form == TEXT else f.between}{end}" if body else end


def shortened(message: Message, chars: int) -> Message:
    """``message`` without blocks and with its lines cut to ``chars`` characters in all (an ellipsis and
    「完整内容见链接」 saying so): what is sent when not even the lines fit."""
    kept: list[str] = []
    left = chars
    for line in message.lines:
        if left <= 0:
            break
        kept.append(line if len(line) <= left else line[:left] + "…")
        left -= len(line)
    return replace(message, lines=kept, blocks=(), more=0, notes=(CUT_NOTE,))


def fitted(message: Message, form: str, fits: Callable[[str], bool]) -> str:
    """The body of ``message`` in ``form``: every block when it ``fits``, else as many as fit, in order (never
    part of one), then the spare lines of as many of those as fit, in order; when not even none fit, the lines
    cut short (:func:`shortened`); the link whole in each. A body only grows with what it holds, so each is the
    most that fits, found by halving (a dozen tries for a message of any length, each one apprise's
    preparation of it)."""
    whole = render(message, form)
    if fits(whole):
        return whole
    blocks = _most(len(message.blocks), lambda n: fits(render(message, form, n, 0)))
    if blocks is not None:
        spared = _most(blocks, lambda n: fits(render(message, form, blocks, n)))
        return render(message, form, blocks, spared)
    chars = _most(sum(len(line) for line in message.lines), lambda n: fits(render(shortened(message, n), form)))
    return render(shortened(message, chars or 0), form)


def _most(high: int, fits: Callable[[int], bool]) -> int | None:
    """The largest n in 0..high that ``fits`` (which holds up to some n and not after), None when not even 0."""
    if high < 0 or not fits(0):
        return None
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
