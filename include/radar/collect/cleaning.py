"""Turn a WeChat article body from WeRSS into clean text for the LLM.

WeRSS hands over ``content_html`` (the WeChat page, the body in ``#js_content``, with scripts and follow
chrome) or ``content`` (a simplified re-render, chrome included). Both take one path: pick the body node, walk
it iteratively (WeChat markup nests thousands of levels deep), keep paragraphs, lists and tables as plain
lines, drop the chrome, normalise whitespace. The text is what the LLM sees and what is hashed: deterministic,
never markup. Nothing raises: a parser failure falls back to a regex tag strip, with the reason recorded.
"""

from __future__ import annotations

import hashlib
import html as htmllib
import logging
import re
import unicodedata
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bs4 (with lxml, a quarter of a second) is imported by the first body cleaned, not by every
    # task process that imports ingest.py through the runtime
    from bs4 import BeautifulSoup, Tag

log = logging.getLogger(__name__)

# Article bodies are rarely above 1 MB; beyond 5 MB the rest is almost surely junk, and parsing it would
# cost seconds per article. Text before the cut is kept.
MAX_HTML_BYTES = 5_000_000
CONVERSION_ERROR_PREFIX = "转换失败"
CONVERSION_ERROR_REASON = "server conversion error (no body yet)"

# Nodes whose content is never article text (code, widgets, raw-text elements that could echo markup).
DROP_TAGS = frozenset(
    "script style noscript iframe svg math template textarea title xmp plaintext noembed noframes object embed "
    "canvas audio video head select form button input mp-style-type".split()
)
# Line-break weight requested before and after a block: 2 = paragraph (blank line), 1 = single line.
BLOCK_BREAKS = {
    **dict.fromkeys("p div section article header footer main aside nav figure figcaption address".split(), 2),
    **dict.fromkeys("h1 h2 h3 h4 h5 h6 blockquote pre table ul ol dl hr".split(), 2),
    **dict.fromkeys("li tr dt dd caption".split(), 1),
}
# Whole lines that are WeChat follow/share chrome; a line made only of these tokens (and counters) is dropped.
BOILERPLATE = frozenset(
    "微信扫一扫关注该公众号 微信扫一扫 扫一扫 使用小程序 微信扫一扫使用小程序 长按识别二维码 长按二维码关注 长按识别二维码关注 "
    "点击上方蓝字关注我们 点击蓝字关注我们 点击上方蓝字关注 关注我们 阅读原文 轻触阅读原文 阅读 分享 在看 点赞 赞 收藏 留言 "
    "写留言 听过 赞赏 视频 小程序 轻点两下取消赞 轻点两下取消在看 预览时标签不可点 继续滑动看下一个 向上滑动看下一个 知道了 "
    "取消 允许 点个在看 点个赞 分享收藏在看点赞 喜欢此内容的人还喜欢".split()
)
# Variants with the account's name inside ("点击上方“某某财经”关注我们", "长按识别下方二维码").
BOILERPLATE_RE = re.compile(
    r"(点击|戳)(上方|下方|顶部|上面|文末).{0,16}关注.{0,8}|(点击|戳)?(上方)?蓝字关注.{0,8}|(长按|扫描|扫码|微信扫一扫).{0,10}二维码.{0,10}"
)
COUNTER_RE = re.compile(r"\d+(\.\d+)?[万wWkK]?\+?")
MEANINGLESS_ALT = frozenset({"", "图片", "图", "image", "img", "picture", "photo", "pic", "配图", "封面"})
QR_RE = re.compile(r"qr[_-]?code", re.IGNORECASE)

_BLANK_RE = re.compile(r"[\s\u200b\u2060\ufeff]*")
_WS_RE = re.compile(r"\s+")
_LINE_WS_RE = re.compile(r"[^\S\n]+")
_INVISIBLE_RE = re.compile(r"[\u200b\u2060\ufeff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
_NON_WORD_RE = re.compile(r"[\W_]+")
_TAG_RE = re.compile(r"<[^>]*>")
_CRUDE_DROP_RE = re.compile(
    r"<(script|style|noscript|iframe|svg|textarea|title|template|mp-style-type)\b.*?</\1\s*>|<!--.*?-->",
    re.IGNORECASE | re.DOTALL,
)
_CRUDE_BREAK_RE = re.compile(r"<\s*/?\s*(p|div|section|br|li|tr|h[1-6]|blockquote|table)\b[^>]*>", re.IGNORECASE)


@dataclass(frozen=True)
class CleanResult:
    """The clean text plus what the caller stores beside it (hash for dedup, raw size, why it is unusable)."""

    text: str
    content_hash: str | None
    raw_size: int
    reason: str | None
    images: int = 0  # images the body had (an article of images has no text, and is not a cut body)

    @property
    def usable(self) -> bool:
        return bool(self.text)


def is_missing_body(html: str | None) -> bool:
    """True when WeRSS has no body yet: nothing, blanks, or its ``转换失败: ...`` conversion-error string."""
    if not isinstance(html, str) or _BLANK_RE.fullmatch(html):
        return True
    return _is_conversion_error(html)


def clean_html(html: str | None) -> CleanResult:
    """Clean one article body (either WeRSS shape); never raises, the reason says what went wrong."""
    try:
        return _clean(html)
    except Exception as exc:  # last line of defence: the ingest loop must go on
        log.exception("cleaning failed")
        return CleanResult("", None, 0, f"cleaning failed: {type(exc).__name__}")


def _clean(html: str | None) -> CleanResult:
    if html is None or _BLANK_RE.fullmatch(html):
        return CleanResult("", None, 0 if html is None else _byte_size(html), "empty body")
    raw_size = _byte_size(html)
    if _is_conversion_error(html):
        return CleanResult("", None, raw_size, CONVERSION_ERROR_REASON)
    reasons: list[str] = []
    # the parser would turn a NUL into U+FFFD inside a word; a lone surrogate cannot be encoded at all
    html = _SURROGATE_RE.sub("\ufffd", html.replace("\x00", ""))
    if raw_size > MAX_HTML_BYTES:
        html = html.encode("utf-8")[:MAX_HTML_BYTES].decode("utf-8", "ignore")
        reasons.append(f"body too large: {raw_size} bytes, truncated")
    try:
        text, images = _extract(html)
    except Exception as exc:
        log.warning("HTML parsing failed (%s), falling back to a plain tag strip", exc)
        reasons.append(f"parser failed ({type(exc).__name__}), plain tag strip used")
        text, images = _normalise(_crude_strip(html)), 0
    if not text:
        reasons.append("no text (images only)" if images else "no text after cleaning")
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest() if text else None
    return CleanResult(text, content_hash, raw_size, "; ".join(reasons) or None, images)


def _byte_size(html: str) -> int:
    return len(html.encode("utf-8", "surrogatepass"))


def _is_conversion_error(html: str) -> bool:
    """WeRSS renders a missing body as ``<p>转换失败: 'NoneType' ...</p>``: short, and starts with 转换失败."""
    if len(html) > 2000:
        return False
    text = htmllib.unescape(_TAG_RE.sub("", html))
    return _INVISIBLE_RE.sub("", text).strip().startswith(CONVERSION_ERROR_PREFIX)


def _body_root(soup: BeautifulSoup) -> Tag:
    from bs4 import Tag  # imported on first use: see the top

    found = soup.find(id="js_content") or soup.find(class_="rich_media_content") or soup.body
    return found if isinstance(found, Tag) else soup


def _dropped(tag: Tag) -> bool:
    if tag.name in DROP_TAGS:
        return True
    marks = [tag.get("id"), tag.get("class")]
    joined = " ".join(m if isinstance(m, str) else " ".join(m) for m in marks if m)
    return bool(joined) and QR_RE.search(joined) is not None


def _extract(html: str) -> tuple[str, int]:
    """Walk the body iteratively; returns the normalised text and how many images the body had."""
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, Tag, XMLParsedAsHTMLWarning
    from bs4.element import NavigableString, PreformattedString

    with warnings.catch_warnings():  # short bodies look like file names to bs4; that guess is noise here
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(html, "lxml")
    writer = _TextWriter()
    stack: list[object] = [_body_root(soup)]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):  # ("end", name): leaving a tag
            writer.close(node[1])
        elif isinstance(node, NavigableString):
            if not isinstance(node, PreformattedString) and node:
                writer.text(str(node))
        elif isinstance(node, Tag) and not _dropped(node) and writer.open(node):
            stack.append(("end", node.name))
            stack.extend(reversed(node.contents))
    return _normalise("".join(writer.out)), writer.images


class _TextWriter:
    """The text of a body as its tags open and close: blocks become line breaks, list items bullets, table
    rows one line with cells between ``|``, ``<pre>`` keeps its spaces, an image's meaningful alt text."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.pending = 0  # line breaks owed before the next text (max of the requests: nested blocks do not pile up)
        self.bullet = False  # an <li> started and its "- " is not written yet
        self.cells = 0  # depth inside td/th: breaks become spaces so a row stays on one line
        self.pre = 0  # depth inside <pre>
        self.items = 0  # depth inside <li> (paragraphs inside a list item stay single lines)
        self.rows: list[int] = []  # cells seen so far in each open <tr>
        self.images = 0

    def open(self, tag: Tag) -> bool:
        """Enter ``tag``; False when it has no content to walk (a break, an image)."""
        name = tag.name
        if name == "br":  # a forced break; inside a pending block break it adds nothing
            if self.cells or not self.pending:
                self.out.append(" " if self.cells else "\n")
            return False
        if name == "img":
            self.images += 1
            alt = tag.get("alt")
            if isinstance(alt, str) and _meaningful_alt(alt):
                self.emit(f" {alt.strip()} ")
            return False
        if name in BLOCK_BREAKS:
            self.brk(BLOCK_BREAKS[name])
        if name == "li":
            self.bullet, self.items = True, self.items + 1
        elif name == "tr":
            self.rows.append(0)
        elif name in ("td", "th"):
            if self.rows:
                if self.rows[-1]:
                    self.emit(" | ")
                self.rows[-1] += 1
            self.cells += 1
        elif name == "pre":
            self.pre += 1
        return True

    def close(self, name: str) -> None:
        if name in ("td", "th"):
            self.cells -= 1
        elif name == "tr" and self.rows:
            self.rows.pop()
        elif name == "pre":
            self.pre -= 1
        elif name == "li":
            self.bullet, self.items = False, self.items - 1
        if name in BLOCK_BREAKS:
            self.brk(BLOCK_BREAKS[name])

    def text(self, text: str) -> None:
        self.emit(text if self.pre else _WS_RE.sub(" ", text))

    def brk(self, n: int) -> None:
        if self.cells:
            self.out.append(" ")
        else:
            self.pending = max(self.pending, min(n, 1) if self.items else n)

    def emit(self, s: str) -> None:
        if self.pending:
            if s.isspace():
                return
            if self.out:
                self.out.append("\n" * self.pending)
            self.pending = 0
        if self.bullet and not s.isspace():
            self.out.append("- ")
            self.bullet = False
        self.out.append(s)


def _meaningful_alt(alt: str) -> bool:
    alt = alt.strip()
    if alt.lower() in MEANINGLESS_ALT or alt.lower().startswith(("http:", "https:", "data:")):
        return False
    return not re.fullmatch(r"[\w.-]+\.(jpe?g|png|gif|webp|bmp)", alt, re.IGNORECASE)


def _is_boilerplate(line: str) -> bool:
    """A line whose whole text is follow/share chrome; article sentences that mention 分享 are kept."""
    key = _NON_WORD_RE.sub("", line)
    if key in BOILERPLATE or (len(key) <= 30 and BOILERPLATE_RE.fullmatch(key)):
        return True
    tokens = [t for t in _NON_WORD_RE.split(line) if t]
    words = [t for t in tokens if not COUNTER_RE.fullmatch(t)]
    return bool(words) and all(t in BOILERPLATE for t in words)


def _normalise(text: str) -> str:
    """NFC, no invisible or control characters, one space between words, at most one blank line."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _INVISIBLE_RE.sub("", text)
    lines = [_LINE_WS_RE.sub(" ", line).strip() for line in text.split("\n")]
    kept = [line for line in lines if not line or (line.strip("| ") and not _is_boilerplate(line))]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def _crude_strip(html: str) -> str:
    """Regex fallback for when the parser fails: drop code and comments, breaks for blocks, no tags."""
    text = _CRUDE_DROP_RE.sub(" ", html)
    text = _CRUDE_BREAK_RE.sub("\n", text)
    return htmllib.unescape(_TAG_RE.sub(" ", text))
