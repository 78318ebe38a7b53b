"""Text the LLM wrote never becomes a link — in a push (the channels link bare URLs and host
names themselves, so they are defanged) or a page (the digest's markdown keeps only the radar's own page
links). Article links come only from WeRSS rows.

Rooms: decide.py (defanged text), push.py, web/views/common.py (the digest's markdown).
"""

from __future__ import annotations

import json
import re
from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.radar.pushes import decide, push
from include.radar.pushes.message import Message
from tests.slotrun import answer, article, read_page, run_slot, shanghai

pytestmark = pytest.mark.hostile

SLOT = shanghai(2026, 1, 8, 14)
DAILY = shanghai(2026, 1, 8, 22)

# every form a hostile answer can use to get a link in front of the reader
HOSTILE = [
    "https://evil.example/login",
    "http://evil.example",
    "HTTPS://EVIL.EXAMPLE/caps",
    "www.evil.example",
    "evil.example/bare",
    "[领取](https://evil.example/md)",
    "<https://evil.example/auto>",
    "javascript:alert(1)",
    "a@evil.example",
    "evil。example",
    "//evil.example/proto",
    "1.2.3.4/ip",
]
# what a linkifier (Telegram, WeCom, mail clients) turns into a link
LINKABLE = re.compile(r"(?i)(?:https?|ftp):\s*/\s*/|javascript\s*:|[\w-]\.[^\W\d_]{2}|[A-Za-z0-9-][。．｡][A-Za-z]{2}|\d{1,3}(?:\.\d{1,3}){3}")


def _hostile_slot(fakes, form: str) -> dict:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles.append(article(1, SLOT - timedelta(minutes=30), title="文章1"))
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(80, summary=f"利好{form}速领。其余细节")
    return run_slot(SLOT)


@pytest.mark.parametrize("form", HOSTILE)
def test_an_opportunity_push_shows_a_url_the_llm_wrote_as_text(fakes, form):
    _hostile_slot(fakes, form)
    [message] = fakes.sink.received
    *lines, link = message["message"].splitlines()
    text = "\n".join([message["title"], *lines])
    assert LINKABLE.search(text) is None, text
    if "。" not in form:  # (the push keeps the summary's first sentence only)
        assert "利好" in lines[0] and ("[.]" in lines[0] or "[:]" in lines[0])  # still readable, as text
    assert link.startswith("https://radar.example.com/radar/analysis/")  # the push's one link is the radar's


def _digest_slot(fakes, title: str, digest_md: str) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles.append(article(1, shanghai(2026, 1, 8, 9), title="文章1"))
    fakes.at(DAILY)

    def respond(body):
        user = body["messages"][1]["content"]
        if "<<<DATA_START>>>" not in user:
            return answer(80)
        data = json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])
        return json.dumps({
            "has_opportunity": True,
            "top_opportunities": [{"analysis_id": a["analysis_id"], "title": title, "reason": "见 https://evil.example"}
                                  for a in data["analyses"]],
            "digest_md": digest_md, "watchlist": ["www.evil.example"],
            "stats": {"analysed": 1, "opportunities": 1, "failed": 0},
        }, ensure_ascii=False)

    fakes.deepseek.responder = respond


def test_the_daily_push_and_page_show_urls_in_the_digest_as_text(fakes):
    digest_md = "\n\n".join(["## 今日要点", *[f"- 形式 {i}：{form}" for i, form in enumerate(HOSTILE)],
                             "[原文](https://mp.weixin.qq.com/s/fake) [当日分析](/analysis/1)"])
    _digest_slot(fakes, "储能 https://evil.example/top 速看", digest_md)
    run_slot(DAILY)
    [message] = fakes.sink.received
    *lines, link = message["message"].splitlines()
    assert LINKABLE.search("\n".join([message["title"], *lines])) is None, lines
    assert any("evil[.]example" in line for line in lines) and link.startswith("https://radar.example.com/")
    html = read_page(f"/daily/{date(2026, 1, 8)}", DAILY + timedelta(hours=1))
    digest = html[html.find('<div class="md">'):].split("</section>")[0]
    hrefs = re.findall(r'href="([^"]*)"', digest)
    assert hrefs and all(re.fullmatch(r"(/radar)?/analysis/\d+", h) for h in hrefs), hrefs
    assert "evil.example" in digest and "原文" in digest  # shown, as text


def test_an_operator_alert_quoting_an_answer_shows_its_url_as_text():
    message = Message(title="【运维】DeepSeek 调用异常", lines=["not JSON: 'see https://evil.example/x'"],
                           link="https://radar.example.com/radar/")
    title, body = push.fit(message, push.channels_from(["json://radar.example.com/hook"])[0])
    assert "hxxps://evil[.]example/x" in body and body.endswith("\nhttps://radar.example.com/radar/")
    assert LINKABLE.search(body.rsplit("\n", 1)[0]) is None
    title, body = push.fit(message, push.channels_from(["tgram://123456:ABCDEF/42"])[0])  # Telegram: HTML
    assert "hxxps://evil[.]example/x" in body and re.findall(r'href="([^"]*)"', body) == ["https://radar.example.com/radar/"]


def test_an_operator_alert_names_the_radars_command_as_it_is_typed():
    from include.radar.operations.alerts import CAUSES

    action = CAUSES["werss_not_collecting"].action
    message = Message(title="WeRSS 没有在采集", lines=["见 evil.example", f"处理：{action}"],
                           link="https://radar.example.com/radar/")
    for url in ("json://radar.example.com/hook", "tgram://123456:ABCDEF/42"):
        title, body = push.fit(message, push.channels_from([url])[0])
        assert "python -m include.radar.cli check" in body and "evil[.]example" in body


@pytest.mark.parametrize(("text", "expected"), [
    ("include.radar.cli.evil.com", "include[.]radar[.]cli[.]evil[.]com"),
    ("xinclude.radar.cli", "xinclude[.]radar[.]cli"),
    ("evil.com/include.radar.cli", "evil[.]com/include.radar.cli"),
])
def test_only_the_radars_command_itself_is_left_whole(text, expected):
    assert decide.defang(text) == expected


@pytest.mark.parametrize("form", HOSTILE)
def test_defang_leaves_nothing_linkable_and_keeps_the_text_readable(form):
    out = decide.defang(f"利好 {form} 速领")
    assert LINKABLE.search(out) is None, out
    assert out.startswith("利好 ") and out.endswith(" 速领")
    assert "evil" in out.lower() or "1[.]2" in out or "javascript[:]" in out


def test_defang_leaves_ordinary_chinese_text_and_numbers_alone():
    text = "宁德时代三季度营收同比增长 3.45%，净利润 80亿元。e.g. 版本 v1.2 发布。下一步：观察。"
    assert decide.defang(text) == text


@given(st.text(alphabet=st.sampled_from(list("abcxyz019.-:/@ 。．[]()<>wWhHtTpPsS利好")), max_size=60))
def test_defang_is_idempotent_and_leaves_nothing_linkable(text):
    once = decide.defang(text)
    assert decide.defang(once) == once
    assert LINKABLE.search(once) is None, once


@pytest.mark.parametrize("form", ["ｅｖｉｌ．ｃｏｍ", "evil﹒com", "evil\u2024com", "evil\u200b.com", "ｗｗｗ.evil.com/x",
                                  "evil\u00ad.com", "evil\u2060.com"])
def test_defang_writes_look_alikes_plainly_first(form):
    """Full-width letters, the small and the leader dot, and zero-width characters hid a host name from the
    defanging while a linkifier or a browser read it as one."""
    out = decide.defang(f"利好 {form} 速领")
    assert "evil[.]com" in out and LINKABLE.search(out) is None, out
    assert decide.defang(out) == out


IGNORABLE = ["\ufe00", "\ufe0f", "\U000e0100", "\U000e01ef", "\u034f", "\u180b", "\u2061", "\u2062", "\u2063",
             "\u2064", "\u200e", "\U000e0041"]


@pytest.mark.parametrize("hidden", IGNORABLE)
@pytest.mark.parametrize("where", ["evil{}.com", "evil.{}com", "evil.c{}om", "ev{}il{}.com/x"])
def test_defang_sees_through_ignorable_characters_beside_a_dot(hidden, where):
    """Variation selectors, the grapheme joiner, a Mongolian selector, invisible operators, bidi marks and tags:
    a browser drops them, so ``evil\ufe0f.com`` opens evil.com."""
    out = decide.defang("利好 " + where.format(hidden, hidden) + " 速领")
    assert "evil[.]com" in out and LINKABLE.search(out) is None and hidden not in out, out
    assert decide.defang(out) == out


def test_defang_reads_the_vertical_full_stop_as_a_dot_and_leaves_emoji_whole():
    assert decide.defang("见 evil︒com 与 ｅｖｉｌ︒ｃｏｍ") == "见 evil[.]com 与 evil[.]com"
    assert decide.defang("晶圆厂扩产。国产化率︒提升") == "晶圆厂扩产。国产化率︒提升"  # Chinese full stops stay
    emoji = "❤️ 热度 👨\u200d👩\u200d👧 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f 1️⃣"
    assert decide.defang(emoji) == emoji  # their selectors and joiners sit beside no host name


@pytest.mark.parametrize(("text", "expected"), [
    ("贵州茅台（600519.SH）提价", "贵州茅台（600519）提价"),
    ("腾讯控股(0700.HK)回购", "腾讯控股(00700)回购"),
    ("比亚迪002594.sz与汇丰5.HK、宁德时代 300750.SZ。", "比亚迪002594与汇丰00005、宁德时代 300750。"),
    ("关注命中：600519.SH、SH600519", "关注命中：600519、SH600519"),
    ("贵州茅台（６００５１９．ＳＨ）", "贵州茅台（600519）"),
    ("600519\ufe0f.SH", "600519"),
])
def test_a_security_code_is_written_dot_free_and_read_whole(text, expected):
    """A code with its exchange's suffix reads as a host name (``.sh`` is a TLD): it reached readers as
    ``600519[.]SH``. The radar writes codes dot-free, so no channel links them."""
    assert decide.defang(text) == expected
    assert decide.defang(expected) == expected


def test_a_host_name_shaped_like_a_code_is_still_defanged():
    assert decide.defang("x600519.SH.evil.com") == "x600519[.]SH[.]evil[.]com"
    assert decide.defang("600519.SH.evil.com 与 evil.sh") == "600519[.]SH[.]evil[.]com 与 evil[.]sh"
    assert decide.defang("https://600519.sh/x") == "hxxps://600519/x"  # no host left to open
    assert decide.defang("，：（）！") == "，：（）！"  # Chinese punctuation is left as the reader reads it


@pytest.mark.parametrize("form", ["evil\u0301.com", "évil\u0301\u0323.com/x", "🎁.ws", "❤️.ws", "1️⃣.ws", "見る\u3099.jp",
                                  "💰💰.to/领取"])
def test_defang_sees_a_host_name_after_a_combining_mark_or_an_emoji(form):
    """A label may end in a combining mark (IDNA keeps it: evil\u0301.com is a host) or be emoji (🎁.ws is
    registered): the dot after one is a host name's dot as after a letter."""
    out = decide.defang(f"利好 {form} 速领")
    assert "[.]" in out and "." not in out.replace("[.]", ""), out
    assert decide.defang(out) == out


@pytest.mark.parametrize(("text", "expected"), [
    ("特斯拉（TSLA.US）与苹果 AAPL.O、AAPL.OQ", "特斯拉（TSLA）与苹果 AAPL.O、AAPL.OQ"),
    ("三星电子 005930.KS、丰田 7203.T、Kakao 035720.KQ", "三星电子 005930.KS、丰田 7203.T、Kakao 035720.KQ"),
    ("上证指数 000001.SH 与平安银行 000001.SZ、沪深300（000300.SS）", "上证指数 SH000001 与平安银行 SZ000001、沪深300（SH000300）"),
    ("SH000001 与 600519.SH", "SH000001 与 600519"),
])
def test_a_foreign_or_ambiguous_code_reads_whole_and_says_which(text, expected):
    """Codes of other markets read as written (a ticker's .US goes, as .SH does: letters are no A-share);
    six digits that both Shanghai (its indices) and Shenzhen use keep their exchange, dot-free."""
    assert decide.defang(text) == expected
    assert decide.defang(expected) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("tsla.us 与 evil.us", "tsla[.]us 与 evil[.]us"),  # lower case: no code, a host
    ("005930.KS.evil.com", "005930[.]KS[.]evil[.]com"),
    ("x005930.KS 与 evil.005930.KS", "x005930[.]KS 与 evil.005930[.]KS"),
    ("AAPL.OQ.evil.com", "AAPL[.]OQ[.]evil[.]com"),
    ("TSLA.US.evil.com/x", "TSLA[.]US[.]evil[.]com/x"),
])
def test_a_host_shaped_like_a_foreign_code_is_still_defanged(text, expected):
    out = decide.defang(text)
    assert out == expected and LINKABLE.search(out.replace("[.]", " ")) is None
