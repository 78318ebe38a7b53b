"""Tests for include.radar.collect.cleaning: real WeRSS shapes, pathological input, and property tests.

No database: none of these tests request the fixtures of conftest.py.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from include.radar.collect import cleaning
from include.radar.collect.cleaning import MAX_HTML_BYTES, CleanResult, clean_html, is_missing_body

TAG_PATTERN = re.compile(r"<\s*/?\s*[a-zA-Z][^>]*>")
CONVERSION_ERROR = "<p>转换失败: 'NoneType' object has no attribute 'strip'</p>"

# content_html: the original WeChat page (trimmed), body in #js_content, chrome around and inside it.
WECHAT_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>新能源车的下一站</title>
<style>.rich_media_content{font-size:17px}</style>
<script>var msg_title = "新能源车的下一站"; window.__QMTPL_SSR_DATA__ = {"a": "<b>"};</script>
</head>
<body id="activity-detail">
<div class="rich_media_area_primary">
  <h1 class="rich_media_title" id="activity-name">新能源车的下一站</h1>
  <div id="meta_content"><span class="rich_media_meta rich_media_meta_nickname">某某研究</span></div>
  <div class="rich_media_content js_underline_content" id="js_content" style="visibility: hidden;">
    <mp-style-type data-value="3"></mp-style-type>
    <section style="text-align:center"><span style="color:rgb(0,122,170)">点击上方蓝字关注我们</span></section>
    <section><img class="rich_pages wxw-img" data-src="https://mmbiz.qpic.cn/a.png" alt="图片"></section>
    <p style="margin:0 0 8px"><span style="font-size:15px">2024 年国内新能源车渗透率首次超过&nbsp;50%，</span><strong>行业进入下半场</strong>。</p>
    <p><br></p>
    <h2>一、行业概况</h2>
    <p>今天和大家分享一个观察：价格战仍在继续。</p>
    <ul><li><p>比亚迪销量第一</p></li><li>特斯拉 <em>降价</em> 5%</li></ul>
    <table><tbody>
      <tr><th>公司</th><th>销量（万辆）</th></tr>
      <tr><td><p>比亚迪</p></td><td>302</td></tr>
      <tr><td>特斯拉</td><td>178</td></tr>
    </tbody></table>
    <p><img data-src="https://mmbiz.qpic.cn/b.png" alt="2024年各品牌销量对比"></p>
    <script>console.log("in body")</script>
    <div class="qr_code_pc_inner"><p>长按识别二维码</p></div>
    <p style="text-align:center">分享</p><p>在看</p><p>点赞</p>
  </div>
  <div id="js_pc_qr_code" class="qr_code_pc">
    <img class="qr_code_pc_img" src="/mp/qrcode?scene=1"><p>微信扫一扫<br>关注该公众号</p>
  </div>
  <div id="js_profile_qrcode" class="profile_container"><p>微信扫一扫关注该公众号</p></div>
  <div class="rich_media_tool"><a id="js_view_source">阅读原文</a><span>阅读 10万+</span></div>
</div>
</body></html>"""

# content as WeRSS v1.4.9 re-renders it: no #js_content, images reduced to alt="图片", chrome kept.
WERSS_CONTENT = """<p>点击上方“某某研究”关注我们</p>
<p><img alt="图片"></p>
<p>央行宣布降准 0.5 个百分点，释放长期资金约 1 万亿元。</p>
<h3>影响</h3>
<ol><li>银行：负债成本下降</li><li>地产：边际改善</li></ol>
<p><img alt="图片"></p>
<p>微信扫一扫关注该公众号</p>
<p>继续滑动看下一个</p>
<p>轻触阅读原文</p>
<p>向上滑动看下一个</p>
<p>知道了</p>
<p>微信扫一扫<br>使用小程序</p>
<p>取消 允许</p>
<p>视频 小程序 赞，轻点两下取消赞 在看，轻点两下取消在看 分享 留言 收藏 听过</p>"""


def lines(result: CleanResult) -> list[str]:
    return result.text.split("\n")


# ---------------------------------------------------------------- realistic samples


def test_wechat_page_keeps_the_body_and_its_structure() -> None:
    result = clean_html(WECHAT_PAGE)
    assert result.usable and result.reason is None
    assert result.text.startswith("2024 年国内新能源车渗透率首次超过 50%，行业进入下半场。")
    assert "一、行业概况" in lines(result)
    assert "今天和大家分享一个观察：价格战仍在继续。" in lines(result)
    assert "- 比亚迪销量第一\n- 特斯拉 降价 5%" in result.text
    assert "公司 | 销量（万辆）\n比亚迪 | 302\n特斯拉 | 178" in result.text
    assert "2024年各品牌销量对比" in lines(result)


def test_wechat_page_drops_code_chrome_and_everything_outside_js_content() -> None:
    text = clean_html(WECHAT_PAGE).text
    for gone in (
        "msg_title",
        "console.log",
        "font-size",
        "微信扫一扫",
        "关注该公众号",
        "长按识别二维码",
        "点击上方蓝字",
        "阅读原文",
        "10万+",
        "某某研究",
        "新能源车的下一站",
        "图片",
    ):
        assert gone not in text, gone
    for line in ("分享", "在看", "点赞"):
        assert line not in text.split("\n")
    assert not TAG_PATTERN.search(text)


def test_wechat_page_exact_text() -> None:
    assert clean_html(WECHAT_PAGE).text == (
        "2024 年国内新能源车渗透率首次超过 50%，行业进入下半场。\n\n"
        "一、行业概况\n\n"
        "今天和大家分享一个观察：价格战仍在继续。\n\n"
        "- 比亚迪销量第一\n- 特斯拉 降价 5%\n\n"
        "公司 | 销量（万辆）\n比亚迪 | 302\n特斯拉 | 178\n\n"
        "2024年各品牌销量对比"
    )


def test_werss_v149_content_shape() -> None:
    result = clean_html(WERSS_CONTENT)
    assert result.text == (
        "央行宣布降准 0.5 个百分点，释放长期资金约 1 万亿元。\n\n影响\n\n- 银行：负债成本下降\n- 地产：边际改善"
    )
    assert result.reason is None


def test_rich_media_content_then_body_fallbacks() -> None:
    html = '<body><div>导航</div><div class="rich_media_content"><p>正文</p></div></body>'
    assert clean_html(html).text == "正文"
    assert clean_html("<body><div>只有 body</div></body>").text == "只有 body"
    assert clean_html("只是一段文字").text == "只是一段文字"


def test_headings_lists_and_tables() -> None:
    html = """<h1>大标题</h1><p>导语</p><h2>二级</h2><h3>三级</h3>
    <ul><li>一<ul><li>一点一</li></ul></li><li>二</li></ul>
    <table><tr><td>a</td><td></td><td>c</td></tr><tr><td></td><td></td></tr><tr><td>d <br>e</td><td>f</td></tr></table>
    <p>尾</p>"""
    assert clean_html(html).text == ("大标题\n\n导语\n\n二级\n\n三级\n\n- 一\n- 一点一\n- 二\n\na | | c\nd e | f\n\n尾")


def test_boilerplate_lines_dropped_but_sentences_mentioning_them_kept() -> None:
    html = """<p>分享</p><p>欢迎转发分享给需要的朋友。</p><p>点赞 在看</p><p>点赞数不代表质量。</p>
    <p>在看 12</p><p>扫描下方二维码添加助理微信</p><p>点击上方“投资笔记”关注我们</p>
    <p>点评：关注政策变化。</p><p>扫描仪市场关注度提升。</p>"""
    assert clean_html(html).text.split("\n\n") == [
        "欢迎转发分享给需要的朋友。",
        "点赞数不代表质量。",
        "点评：关注政策变化。",
        "扫描仪市场关注度提升。",
    ]


def test_qr_code_nodes_are_dropped_by_id_or_class() -> None:
    html = """<div id="js_content"><p>正文</p><div class="qrcode_box"><p>扫我</p></div>
    <section id="js_profile_qrcode">卡片</section><div class="QR-Code">码</div></div>"""
    assert clean_html(html).text == "正文"


def test_whitespace_entities_and_unicode_normalisation() -> None:
    html = (
        "<p>\u3000\u3000首行\u00a0\u00a0缩进\t\t与\u200b零宽\ufeff字符</p>"
        "<p></p><div><p><br></p></div><p>&lt;b&gt; 不是标签 &amp; a &lt; b &quot;引号&quot; &#20013;</p>"
        "<p>cafe\u0301</p><p>a<br>b<br><br>c</p>"
    )
    result = clean_html(html)
    assert result.text == '首行 缩进 与零宽字符\n\n<b> 不是标签 & a < b "引号" 中\n\ncafé\n\na\nb\n\nc'
    assert unicodedata.is_normalized("NFC", result.text)
    assert result.content_hash == hashlib.sha256(result.text.encode("utf-8")).hexdigest()
    assert result.raw_size == len(html.encode("utf-8"))


def test_non_html_text_survives() -> None:
    assert clean_html("a < b and c > d, 1<2").text == "a < b and c > d, 1<2"


# ---------------------------------------------------------------- missing bodies


def test_conversion_error_is_a_missing_body_not_text() -> None:
    assert is_missing_body(CONVERSION_ERROR)
    result = clean_html(CONVERSION_ERROR)
    assert result == CleanResult(
        "", None, len(CONVERSION_ERROR.encode("utf-8")), "server conversion error (no body yet)"
    )
    assert not result.usable


@pytest.mark.parametrize(
    "variant",
    ["转换失败: boom", "  <div>\n <p> 转换失败：'NoneType' object</p></div>", "<p>\ufeff转换失败</p>"],
)
def test_conversion_error_variants(variant: str) -> None:
    assert is_missing_body(variant)
    assert clean_html(variant).reason == "server conversion error (no body yet)"


@pytest.mark.parametrize("blank", [None, "", " ", "\n\t  \n", "\u3000\u00a0", "\ufeff\u200b "])
def test_blank_bodies(blank: str | None) -> None:
    assert is_missing_body(blank)
    result = clean_html(blank)
    assert result.text == "" and result.content_hash is None and result.reason == "empty body"
    assert not result.usable


def test_real_bodies_are_not_missing() -> None:
    assert not is_missing_body("<p>正文</p>")
    assert not is_missing_body(WECHAT_PAGE)
    long_article = "<p>转换失败率是本文的主题。</p>" + "<p>正文内容。</p>" * 300
    assert not is_missing_body(long_article)
    assert clean_html(long_article).text.startswith("转换失败率是本文的主题。")


# ---------------------------------------------------------------- images


def test_images_only() -> None:
    result = clean_html(
        '<div id="js_content"><p><img alt="图片" data-src="a.png"></p><img src="b.png"><img alt="Image"></div>'
    )
    assert result.text == "" and result.content_hash is None
    assert result.reason == "no text (images only)"


def test_meaningful_alt_kept_and_placeholders_dropped() -> None:
    html = '<p>见下图<img alt="营收走势">。</p><p><img alt="https://x/y.png"><img alt="IMG_0001.JPG"><img alt=" 图片 "></p>'
    assert clean_html(html).text == "见下图 营收走势 。"


def test_markup_without_text_or_images() -> None:
    result = clean_html("<div><script>var a = 1;</script><style>p{}</style></div>")
    assert result.text == "" and result.reason == "no text after cleaning"


# ---------------------------------------------------------------- pathological input


def test_ten_megabytes_returns_truncated_but_usable() -> None:
    paragraph = '<p style="margin:0;color:rgb(1,2,3)"><span>这是一段用于测量性能的测试文字。</span><img alt="图片" src="x"></p>\n'
    html = '<div id="js_content">' + paragraph * (10_000_000 // len(paragraph.encode("utf-8")) + 1) + "</div>"
    size = len(html.encode("utf-8"))
    assert size > 10_000_000
    started = time.perf_counter()
    result = clean_html(html)
    elapsed = time.perf_counter() - started
    print(f"\nclean_html on {size / 1e6:.1f} MB of paragraphs: {elapsed:.2f} s, {len(result.text)} chars out")
    assert result.usable and result.raw_size == size
    assert result.reason == f"body too large: {size} bytes, truncated"
    assert result.text.startswith("这是一段用于测量性能的测试文字。\n\n")
    assert len(result.text.encode("utf-8")) < MAX_HTML_BYTES


def test_ten_megabytes_of_one_text_node() -> None:
    html = "<p>" + "字" * 3_400_000 + "</p>"
    started = time.perf_counter()
    result = clean_html(html)
    print(f"\nclean_html on {result.raw_size / 1e6:.1f} MB in one text node: {time.perf_counter() - started:.2f} s")
    assert result.usable and "truncated" in (result.reason or "")
    assert set(result.text) == {"字"}


def test_deeply_nested_markup() -> None:
    html = "<div>" * 5000 + "<p>深处的文字</p>" + "</div>" * 5000
    assert clean_html(html).text == "深处的文字"
    unclosed = "<section><span>" * 5000 + "没有闭合"
    assert clean_html(unclosed).text == "没有闭合"


@pytest.mark.parametrize(
    "broken",
    [
        "<p>unclosed <b>bold <i>both",
        "</div></p>stray closers<p",
        "<div id='js_content'><p>a<table><td>cell</div>",
        "<<p>>double<</p>>",
        '<img alt="unterminated',
        "<!-- never closed comment <p>hidden</p>",
        "<![CDATA[x]]><?php echo 1 ?><!DOCTYPE html>text",
        "<plaintext><p>raw</p>",
        "<p>a\x00b\x01c\ud800d</p>",
        "<p>" + "&amp;" * 10000 + "</p>",
    ],
)
def test_broken_markup_never_raises(broken: str) -> None:
    result = clean_html(broken)
    assert isinstance(result, CleanResult)
    assert (result.content_hash is None) == (result.text == "")
    assert "\x00" not in result.text
    result.text.encode("utf-8")  # no lone surrogates: storable and hashable


def test_unclosed_tags_keep_their_text() -> None:
    assert clean_html("<p>unclosed <b>bold <i>both").text == "unclosed bold both"


def test_parser_failure_falls_back_to_tag_strip(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(html: str) -> tuple[str, int]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cleaning, "_extract", explode)
    result = clean_html("<p>第一段</p><script>var x=1;</script><p>第二 &amp; 段</p><p>分享</p>")
    assert result.text == "第一段\n\n第二 & 段"
    assert result.reason == "parser failed (RecursionError), plain tag strip used"


def test_unexpected_failure_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(html: str) -> str:
        raise ValueError("boom")

    monkeypatch.setattr(cleaning, "_byte_size", explode)
    result = clean_html("<p>x</p>")
    assert result == CleanResult("", None, 0, "cleaning failed: ValueError")


# ---------------------------------------------------------------- properties

SAFE_ENTITIES = ["&amp;", "&nbsp;", "&quot;", "&#20013;", "&#x6587;", "&copy;", "&hellip;", "&ensp;", "&#12288;"]
CHINESE = list("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你") + [
    "公众号",
    "扫一扫",
    "分享",
]
# text nodes: no '<', '>' or '&' (a bare "&lt" is decoded to '<' by HTML parsers), entities only from SAFE_ENTITIES
plain_chars = st.characters(exclude_characters="<>&", exclude_categories=("Cs",))
text_piece = st.one_of(
    st.text(plain_chars, max_size=12),
    st.sampled_from(CHINESE),
    st.sampled_from(SAFE_ENTITIES),
    st.sampled_from([" ", "\n", "\t", "\u00a0", "\u3000", "\u200b", "\ufeff"]),
)
safe_text = st.lists(text_piece, max_size=5).map("".join)

TAG_NAMES = (
    "p div section span a b strong em i h1 h2 h3 h4 h5 h6 ul ol li table tbody thead tr td th br hr img blockquote "
    "pre code script style noscript iframe svg math template textarea title xmp form button input select option "
    "mp-style-type mpvoice body html head figure sup sub font center"
).split()
tag_name = st.one_of(st.sampled_from(TAG_NAMES), st.from_regex(r"[a-z][a-z0-9-]{0,7}", fullmatch=True))
attr_name = st.one_of(
    st.sampled_from(["id", "class", "style", "alt", "src", "data-src", "href", "title"]),
    st.from_regex(r"[a-z][a-z-]{0,6}", fullmatch=True),
)
attr_value = st.one_of(
    st.sampled_from(["js_content", "rich_media_content", "qr_code_pc", "js_profile_qrcode", "图片", "", "a<b>c"]),
    st.text(st.characters(exclude_characters='"', exclude_categories=("Cs",)), max_size=10),
)


@st.composite
def attributes(draw: st.DrawFn) -> str:
    parts = []
    for name, value in draw(st.lists(st.tuples(attr_name, attr_value), max_size=3)):
        if name == "alt":  # alt is emitted as text, so it follows the text-node rule
            value = re.sub(r"[<>&]", "", value)
        parts.append(f' {name}="{value}"')
    return "".join(parts)


@st.composite
def element(draw: st.DrawFn, children: st.SearchStrategy[str]) -> str:
    name = draw(tag_name)
    inner = "".join(draw(st.lists(children, max_size=4)))
    closing = draw(st.sampled_from(["full", "full", "none", "self"]))
    if closing == "self":
        return f"<{name}{draw(attributes())}/>{inner}"
    return f"<{name}{draw(attributes())}>{inner}" + (f"</{name}>" if closing == "full" else "")


html_like = st.recursive(
    st.one_of(
        safe_text, safe_text.map(lambda t: f"<!--{t.replace('-', '')}-->"), st.sampled_from(["</p>", "</div>", "<br>"])
    ),
    lambda children: element(children),
    max_leaves=25,
)
html_documents = st.lists(html_like, min_size=1, max_size=4).map("".join)
# anything goes, including '<', '>' and entities inside text
messy_piece = st.one_of(
    st.text(max_size=20), st.sampled_from(["<", ">", "&lt;", "&gt;", "&#60;", "</", "<p", "<!--", "]]>"])
)
messy_html = st.one_of(st.text(), st.lists(st.one_of(html_like, messy_piece), max_size=8).map("".join))

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_invariants(html: str, result: CleanResult) -> None:
    assert isinstance(result, CleanResult)
    assert (result.content_hash is None) == (result.text == "") == (not result.usable)
    if result.text:
        assert result.content_hash == hashlib.sha256(result.text.encode("utf-8")).hexdigest()
    assert result.text == result.text.strip()
    assert "\n\n\n" not in result.text and "\x00" not in result.text
    assert unicodedata.is_normalized("NFC", result.text)
    assert result.raw_size == len(html.encode("utf-8"))
    if is_missing_body(html):
        assert result.text == ""


@PROPERTY_SETTINGS
@given(html_documents)
def test_property_generated_markup_never_leaks_tags(html: str) -> None:
    result = clean_html(html)
    check_invariants(html, result)
    assert not TAG_PATTERN.search(result.text), result.text
    assert "<" not in result.text and ">" not in result.text


@PROPERTY_SETTINGS
@given(messy_html)
def test_property_arbitrary_input_never_raises_and_is_stable(html: str) -> None:
    first, second = clean_html(html), clean_html(html)
    check_invariants(html, first)
    assert first == second


@PROPERTY_SETTINGS
@given(st.text())
def test_property_plain_text(text: str) -> None:
    result = clean_html(text)
    check_invariants(text, result)
    assert result == clean_html(text)
    assert is_missing_body(text) in (True, False)
