"""Is a cleaned WeChat body the article, or one of WeChat's own pages that WeRSS saved in its place? Pure.

What WeRSS users meet (we-mp-rss #149, #311, #34, #292, #382): the verification page (「环境异常」「当前环境异常，
完成验证后即可继续访问。」「去验证」), saved as the body by older WeRSS; empty or cut bodies (only WeChat's chrome,
a body ending inside a tag or mid-sentence, far shorter than its own ``description``); and the pages of deleted,
blocked or withheld articles (「该内容已被发布者删除」「此内容因违规无法查看」「此内容发送失败无法查看」, 「该内容暂时
无法查看」「内容审核中」). A page is recognised by its shape, never a word: only when almost nothing is left once
its own phrases and WeChat's chrome are taken out (an article quoting them is analysed). A verification page,
a cut body and an article under review are *to come* (``Verdict.to_come``: the article keeps waiting and is
rechecked, never sent to the LLM); a deleted or blocked article is *gone*: stored unusable, never analysed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# kinds of verdict, also the account's counters they go to
VERIFICATION, INCOMPLETE, GONE = "verification", "incomplete", "gone"

# What the pages say: each a phrase as WeChat writes it (whitespace and punctuation are ignored when matched).
# the verification page has its notice, or its title together with its button
VERIFICATION_SHAPES = (("完成验证后即可继续访问",), ("环境异常", "去验证"))
VERIFICATION_PHRASES = ("当前环境异常，完成验证后即可继续访问。", "环境异常", "去验证", "完成验证后即可继续访问",
                        "当前环境异常")
GONE_PHRASES = (
    "该内容已被发布者删除", "此内容因违规无法查看", "此内容发送失败无法查看", "违规无法查看",
    "The content has been deleted by the author.", "Unable to view this content because it violates regulation",
)
UNAVAILABLE_PHRASES = ("该内容暂时无法查看", "内容审核中", "该内容正在审核中")
# the words around those pages (buttons, notices, WeChat's chrome) that are not an article either
PAGE_CHROME = (
    "微信扫一扫可打开此内容，使用完整服务", "微信扫一扫关注该公众号", "微信扫一扫使用小程序", "轻触阅读原文", "阅读原文",
    "知道了", "取消", "允许", "继续访问", "向上滑动看下一个", "继续滑动看下一个", "轻点两下取消赞", "轻点两下取消在看",
    "分享", "留言", "收藏", "在看", "点赞", "赞", "视频", "小程序", "返回", "关闭", "微信公众平台", "相关投诉",
    "根据相关法律法规和政策", "查看对应规则", "此内容无法查看", "Weixin Official Accounts Platform",
)
# once the phrases above are taken out, a page leaves at most this many letters (a title, an account name)
PAGE_LEFTOVER = 40
# a page is short: beyond this many letters the body is an article, whatever it quotes
PAGE_MAX = 400
# a body is cut when it has fewer than half the letters of a digest at least this long (and no media)
DIGEST_MIN = 40
MAX_DIGEST = 20_000

_LETTERS_RE = re.compile(r"[\W_]+")
_MEDIA_RE = re.compile(r"<(img|iframe|video|audio|mpvoice|mp-common-[\w-]+|qqmusic)\b", re.IGNORECASE)
_OPEN_TAG_AT_END_RE = re.compile(r"<[^<>]*\Z|<!--(?:(?!-->).)*\Z", re.DOTALL)
_CONTAINER_RE = re.compile(r"<(/?)(div|section)\b[^>]*>", re.IGNORECASE)
# where a sentence or a paragraph may end
_TERMINAL = set("。！？!?.…」』”\"')）】]》>~～—-：:；;、，,") | set("0123456789")


@dataclass(frozen=True)
class Verdict:
    """Why a body is not (yet) the article: ``kind`` (an account counter), the reason stored on the article
    and shown in the pages, and whether the real body may still come."""

    kind: str
    reason: str
    to_come: bool


def letters(text: str) -> str:
    """The text without whitespace, punctuation or symbols: what lengths and phrases are compared on."""
    return _LETTERS_RE.sub("", text or "")


def _page(key: str, phrases: tuple[str, ...], shapes: tuple[tuple[str, ...], ...]) -> bool:
    """The letters ``key`` of a short text are a page made of ``phrases``: they hold every phrase of one of
    ``shapes``, and (almost) nothing is left once its phrases and WeChat's chrome are taken out."""
    if not any(all(letters(p) in key for p in shape) for shape in shapes):
        return False
    for phrase in sorted({letters(p) for p in (*phrases, *PAGE_CHROME)}, key=len, reverse=True):
        key = key.replace(phrase, "")
    return len(key) <= PAGE_LEFTOVER


def _ends_inside_a_tag(html: str) -> bool:
    """The markup stops inside a tag or a comment: it was cut in transit."""
    return _OPEN_TAG_AT_END_RE.search(html.rstrip()[-4000:]) is not None


def _open_containers(html: str) -> int:
    """``div`` and ``section`` elements opened and never closed (WeChat's editor closes every one)."""
    depth = 0
    for match in _CONTAINER_RE.finditer(html):
        depth += -1 if match.group(1) else 1
    return depth


def check(html: str, text: str, *, images: int = 0, description: str | None = None) -> Verdict | None:
    """The verdict on one body: ``html`` as WeRSS sent it, ``text`` what cleaning made of it (``images``: how
    many images cleaning met). None when the body is the article (or an empty one, judged elsewhere)."""
    if not html:
        return None
    # cleaning leaves one space between words: a text this long is longer than any page once its blanks go
    key = letters(text) if len(text) <= 4 * PAGE_MAX else ""
    if key and len(key) <= PAGE_MAX:
        if _page(key, VERIFICATION_PHRASES, VERIFICATION_SHAPES):
            return Verdict(VERIFICATION, "WeChat's verification page (环境异常) saved instead of the body", True)
        if _page(key, GONE_PHRASES, tuple((p,) for p in GONE_PHRASES)):
            return Verdict(GONE, "WeChat's page of a deleted or blocked article (该内容已被发布者删除 / 违规无法查看)",
                           False)
        if _page(key, UNAVAILABLE_PHRASES, tuple((p,) for p in UNAVAILABLE_PHRASES)):
            return Verdict(INCOMPLETE, "WeChat shows the article as unavailable for now (暂时无法查看 / 审核中)", True)
    if not text.strip():
        if images or _MEDIA_RE.search(html):
            return None  # an article of images or a video: cleaning says so (no text)
        return Verdict(INCOMPLETE, "only WeChat's page chrome, no article text (the body was not loaded)", True)
    if _ends_inside_a_tag(html) or (_open_containers(html) >= 2 and text.rstrip()[-1:] not in _TERMINAL):
        return Verdict(INCOMPLETE, "the body is cut: its markup ends mid-way", True)
    digest = letters((description or "")[:MAX_DIGEST])
    if len(digest) >= DIGEST_MIN and not images and not _MEDIA_RE.search(html):
        body = len(letters(text[: 2 * len(digest)]))  # enough of the text to know it is not shorter
        if body * 2 < len(digest):
            return Verdict(INCOMPLETE, f"the body is cut: {body} characters against a digest of {len(digest)}", True)
    return None
