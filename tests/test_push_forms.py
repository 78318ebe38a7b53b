"""Each channel gets the push in its own form — Markdown where it renders Markdown, HTML for e-mail, plain text
elsewhere — with whatever an article or the LLM wrote shown as text (Markdown and HTML metacharacters, links,
look-alike dots, 2,000-character theses, emoji), within the sizes its apprise plugin states, cut between items,
the link whole. What each plugin's ``send()`` gets is read by intercepting apprise just before the network.

Rooms: message.py (the forms, the cut), push.py (channel_form, fit, send_one), briefs.py (the blocks).
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from datetime import date, datetime
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from include.radar.core.slots import SHANGHAI
from include.radar.core.text import in_order
from include.radar.pushes import briefs, events, message, push
from tests.conftest import REPO
from tests.reading import REORDERING, REORDERING_IDS, reads_in_order

pytestmark = pytest.mark.hostile

LINK = "https://radar.example.com/radar/analysis/42?exp=1900000000&sig=" + "ab" * 32
RADAR = "https://radar.example.com/radar/"
# the channels this user base uses, and dialects apprise converts Markdown to
CHANNELS = [
    "wecombot://ROBOTKEY1234567", "feishu://WEBHOOKTOKEN1234567", "lark://WEBHOOKTOKEN1234567",
    "dingtalk://SECRET123456@TOKEN1234567", "tgram://123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi/42",
    "tgram://123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi/42?format=markdown&mdv=v2",
    "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "discord://1234567890/abcdefghijklmnop",
    "schan://SCT1234567890abc", "pushplus://abcdefghijklmnopqrstuvwxyz123456", "bark://localhost/devicekey1234",
    "mailto://user:pass@example.com", "json://localhost/hook", "ntfy://topic",
]
HOSTILE = [
    '<b>粗</b>**紧急** [点此领取](http://evil.example) <a href="https://evil.example">领</a> `码` ~~删~~ ||藏|| &amp; _斜_',
    "ｅｖｉｌ．ｃｏｍ、evil︒com、evil\ufe0f.com、www.evil.example/x、javascript:alert(1)、a@evil.example @all <!channel> <@U1> <at user_id=\"all\">",
    "# 标题 - 列表 > 引用 1. 一 === --- \\ ![图](https://evil.example/i.png)",
    "😀🚀❤️👨\u200d👩\u200d👧 表情，贵州茅台（600519.SH）与腾讯控股（0700.HK）",
]
# what a linkifier (Telegram, WeCom, mail clients) turns into a link
HTML_FORMS = (message.HTML, message.TELEGRAM_HTML, message.MAIL_HTML)
LINKABLE = re.compile(r"(?i)(?:https?|ftp):\s*/\s*/|javascript\s*:|[\w-]\.[^\W\d_]{2}|\d{1,3}(?:\.\d{1,3}){3}")


def _analysis(n: int, hostile: str, direction: str = "bullish") -> dict:
    return {
        "id": n, "score": 90 - n, "summary": hostile + "。" + "长" * 2000, "top_type": "stock", "mp_name": hostile[:30],
        "published_at": datetime(2026, 1, 8, 13, n, tzinfo=SHANGHAI), "evidence_verified": True,
        "watch_hits": [hostile[:20]] if n == 1 else [],
        "result_json": {
            "opportunities": [{"type": "stock", "direction": direction,
                               "targets": ["贵州茅台（600519.SH）", "腾讯控股(0700.HK)", hostile, "长" * 2000]}],
            "checks": {"quotes": [{"quote": hostile + "长" * 2000, "opportunity": 0, "verified": True}]},
        },
    }


def _slot_message() -> message.Message:
    """A slot of hostile opportunities, through the blocks the real push builds (briefs.py)."""
    entries = [events.Entry(a, [a]) for a in (_analysis(n, h, "bearish" if n == 2 else "bullish")
                                              for n, h in enumerate(HOSTILE, 1))]
    blocks = tuple(briefs.opportunity_block(e, [f"号{n}" for n in range(e.lead["id"] % 3 + 1)], date(2026, 1, 8),
                                            f"{RADAR}analysis/{e.lead['id']}?exp=1&sig=cd") for e in entries)
    return message.Message("【机会提醒】14:00 发现 4 条（最高分 89）", [], LINK, blocks, more=1,
                           more_link=f"{RADAR}daily/2026-01-08?exp=1&sig=ef", link_label="查看分析")


def _big_message() -> message.Message:
    """Forty items of 300 characters each: more than any channel here takes."""
    blocks = tuple(message.Block(f"{i} {HOSTILE[i % 4]}" + "长" * 200, (HOSTILE[(i + 1) % 4], "标的：贵州茅台 600519"),
                                 f"{RADAR}analysis/{i}?exp=1&sig=cd") for i in range(40))
    return message.Message("【日报】2026-01-08：40 条机会（最高分 99）", ["分析 40 篇"], LINK, blocks, link_label="查看日报")


def _alert() -> message.Message:
    """An operator alert quoting a 20,000-character answer: no blocks, its one line too long for any channel."""
    return message.Message("【运维】DeepSeek 调用异常", ["not JSON: " + (HOSTILE[0] + "长" * 500) * 30], RADAR)


MESSAGES = {"slot": _slot_message, "big": _big_message, "alert": _alert}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.hrefs += [v for k, v in attrs if k == "href"]

    def handle_data(self, data):
        self.text.append(data)


def _html(body: str) -> _Tags:
    parser = _Tags()
    parser.feed(body)
    return parser


@pytest.mark.parametrize("url", CHANNELS)
def test_each_form_shows_what_an_article_or_the_llm_wrote_as_text(url):
    channel = push.channels_from([url])[0]
    form = push.channel_form(channel).written
    title, body = push.fit(_slot_message(), channel)
    if form == message.MARKDOWN:
        rendered = _html(MarkdownIt("commonmark").render(body))
        assert set(rendered.tags) <= {"p", "strong", "br", "a"}, rendered.tags  # no emphasis, code, image, heading
        assert rendered.tags.count("strong") == body.count("证据：")  # one bold headline per item shown, ours
    elif form in HTML_FORMS:
        rendered = _html(body)
        assert set(rendered.tags) <= {"b", "br", "a"}, rendered.tags
    else:
        rendered = _html("")
        rendered.text = [body]
        assert LINKABLE.search(body.rsplit("\n", 1)[0]) is None
    text = "".join(rendered.text)
    assert all(h.startswith(RADAR) for h in rendered.hrefs) and (form == message.TEXT or LINK in rendered.hrefs)
    shown = text.count("证据：")  # the items that fit this channel (WeCom's 2048 bytes hold fewer), each whole
    assert shown == 4 or (shown >= 1 and message.CUT_NOTE in text)
    assert f"另有 {1 + 4 - shown} 条" in text  # the one beyond the four, and any this channel's size left out
    assert "@" not in text.replace(RADAR, "") and "<!" not in text and "<at" not in text  # no one notified
    assert "<b>粗</b>**紧急** [点此领取](hxxp://evil[.]example)" in text  # item 1 (the watchlist's): as text
    assert "贵州茅台 600519、腾讯控股 00700" in text  # codes read whole, in every item's targets
    assert "600519.SH" not in text and "[.]SH" not in text and "0700.HK" not in text
    assert "长" * 100 not in text and "…」" in text  # a 2,000-character thesis or quote is shortened
    if shown == 4:
        assert "evil[.]com、evil[.]com、evil[.]com" in text and "72 分｜看空" not in text and "88 分｜看空" in text
        assert "👨\u200d👩\u200d👧 表情，贵州茅台（600519）与腾讯控股（00700）" in text


def _intercepted(monkeypatch) -> list[dict]:
    """What each plugin's send() is handed, instead of sending it (apprise's last step before the network)."""
    from apprise.plugins.base import NotifyBase

    calls: list[dict] = []

    def record(self, **kwargs):
        calls.append({"plugin": self, **kwargs})
        return True

    monkeypatch.setattr(NotifyBase, "_timed_send", record)
    return calls


@pytest.mark.parametrize("kind", MESSAGES)
@pytest.mark.parametrize("url", CHANNELS)
def test_no_channels_sender_gets_a_message_over_its_plugins_limit_and_the_link_is_whole(monkeypatch, url, kind):
    calls = _intercepted(monkeypatch)
    channel = push.channels_from([url])[0]
    sent = MESSAGES[kind]()
    assert push.send_one(channel, *push.fit(sent, channel)) is None
    [call] = calls  # one message, never split by apprise
    plugin, title, body = call["plugin"], call["title"], call["body"]
    size = body + (title + "\r\n" if plugin.overflow_amalgamate_title else "")
    assert len(size) <= plugin.body_maxlen, (len(size), plugin.body_maxlen)
    assert len(size.encode()) <= push.BYTE_LIMITS.get(channel.scheme, 10**9)
    assert plugin.title_maxlen == 0 and title == "" or len(title) <= min(plugin.title_maxlen,
                                                                       push.TITLE_LIMITS.get(channel.scheme, 999))
    assert sent.link in body or html.escape(sent.link) in body  # (Slack writes & as &amp;)


@pytest.mark.parametrize("url", ["wecombot://ROBOTKEY1234567", "tgram://123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi/42",
                                 "dingtalk://SECRET123456@TOKEN1234567", "bark://localhost/devicekey1234"])
def test_a_message_that_does_not_fit_is_cut_between_items_never_inside_one(url):
    channel = push.channels_from([url])[0]
    big = _big_message()
    form = push.channel_form(channel)
    title, body = push.fit(big, channel)
    shown = next(k for k in range(len(big.blocks), -1, -1) if body == message.render(big, form.written, k))
    assert 1 <= shown < len(big.blocks) and not form.fits(title, message.render(big, form.written, shown + 1))
    assert message.CUT_NOTE in body and body.endswith(html.escape(LINK) + '">查看日报</a>' if form.written in HTML_FORMS
                                                      else LINK if form.written == message.TEXT else f"(<{LINK}>)")


def test_lines_that_alone_do_not_fit_are_shortened_saying_so_and_the_link_kept():
    [channel] = push.channels_from(["wecombot://ROBOTKEY1234567"])
    title, body = push.fit(_alert(), channel)
    assert body.endswith(f"…\n\n{message.CUT_NOTE}\n{RADAR}") and body.startswith("not JSON: <b>粗</b>**紧急** [点此领取](hxxp")
    assert len((title + "\r\n" + body).encode()) <= 2048 and len((title + "\r\n" + body).encode()) > 1900  # filled


@pytest.mark.parametrize(("url", "form", "declared", "chars", "bytes_", "title"), [
    ("wecombot://ROBOTKEY1234567", "text", "text", 2048, 2048, None),  # apprise sends WeCom text: 2048 bytes
    ("feishu://WEBHOOKTOKEN1234567", "text", "text", 19985, 20000, None),
    ("dingtalk://SECRET123456@TOKEN1234567", "text", "text", 19985, 20000, 250),  # its Markdown has no escapes
    ("dingtalk://SECRET123456@TOKEN1234567?format=markdown", "text", "text", 19985, 20000, 250),
    ("tgram://123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi/42", "html-telegram", "html", 4096, None, None),
    ("tgram://123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi/42?format=markdown", "markdown", "markdown", 4096, None,
     None),
    ("discord://1234567890/abcdefghijklmnop", "markdown", "markdown", 2000, None, 250),
    ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "text", "text", 35000, None, 250),  # mrkdwn: no escapes
    ("mailto://user:pass@example.com", "html-mail", "html", 4000, None, 250),
    ("ntfy://topic", "text", "text", 7800, 4096, 200),
    ("pushplus://abcdefghijklmnopqrstuvwxyz123456", "html", "html", 20000, None, 200),
    ("schan://SCT1234567890abc", "markdown", "text", 4000, None, 32),  # ServerChan shows Markdown, declared text
    ("bark://localhost/devicekey1234", "text", "text", 2000, None, 100),  # what apprise does not say: the table
    ("json://localhost/hook", "text", "text", 4000, None, 250),
    ("json://localhost/hook?format=markdown", "markdown", "markdown", 4000, None, 250),
    ("nosuchservice://token123456", "text", "text", 4000, None, None),
])
def test_each_channel_gets_its_form_and_the_sizes_its_plugin_states(url, form, declared, chars, bytes_, title):
    got = push.channel_form(push.channels_from([url])[0])
    assert (got.written, got.declared, got.body_chars, got.body_bytes, got.title_chars) == (
        form, declared, chars, bytes_, title)


_SAFE = st.text(alphabet=st.sampled_from(list("*_[]()<>&~|`#+-=.!:\\/'\" 0123456789a中😀")), min_size=1, max_size=40)


@given(_SAFE.map(lambda t: " ".join(t.split())).filter(bool))
def test_markdown_escaping_renders_any_text_as_itself(text):
    """CommonMark (markdown-it) reads an escaped line back as exactly its text: no markup of any kind."""
    shown = html.escape(text, quote=False).replace('"', "&quot;")  # markdown-it writes " as &quot;, ' as it is
    assert MarkdownIt("commonmark").render(message.md_escape(text)) == f"<p>{shown}</p>\n"


def test_the_docs_table_of_channels_is_what_channel_form_says():
    doc = (REPO / "docs" / "pushes.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z]+)://` \| (\w+) \| ([^|]+) \|", doc, re.MULTILINE)
    assert len(rows) >= 8
    for scheme, form, limit in rows:
        url = next(u for u in [*CHANNELS, "nosuchservice://token123456"] if u.startswith(scheme + "://"))
        got = push.channel_form(push.channels_from([url])[0])
        assert form == {"text": "text", "markdown": "Markdown", "html": "HTML"}[got.written.split("-")[0]], (scheme, form)
        said = f"{got.body_chars} chars" + (f" · {got.body_bytes} bytes" if got.body_bytes else "")
        assert limit.strip() == said, (scheme, limit, said)


# ------------------------------------------------------------------------------------ a line reads in order

# each field of a push with a control where no host name's character is beside it (there the defanging already
# dropped them), and the text it reads as: 「中微公司 688012」 stays that, 37% stays 37%, 08:30 stays 08:30
LINE_FIELDS = {
    "target": ("{}中微公司（688012.SH）", "标的：中微公司 688012"),
    "code": ("中微公司（688{}012.SH）", "标的：中微公司 688012"),  # a mark inside a code hid it from the push
    "quote": ("营收{}同比增长 37%，08:30 公告", "证据：「营收同比增长 37%，08:30 公告」"),
    "account": ("研究所{}（深度）", "研究所（深度） · 08:30 发布"),
    "thesis": ("中微公司{}订单大增，营收增长 37%。", "中微公司订单大增，营收增长 37%。"),
    "title": ("中微公司{}订单大增 37%", "· 【精选】中微公司订单大增 37%"),  # the 22:00 push's glance of a top opportunity
    "failed title": ("中微公司{}订单 37%", "未能分析 1 篇：《中微公司订单 37%》"),  # the 22:00 push's failures
}


def _message_with(field: str, control: str) -> message.Message:
    """A push whose one item (and the 22:00 glance's lines) holds ``control`` in ``field``."""
    value = {f: raw.format(control if f == field else "") for f, (raw, _) in LINE_FIELDS.items()}
    analysis = {
        "id": 7, "score": 82, "summary": value["thesis"], "top_type": "stock", "mp_name": value["account"],
        "published_at": datetime(2026, 1, 8, 8, 30, tzinfo=SHANGHAI), "evidence_verified": True,
        "result_json": {"opportunities": [{"type": "stock", "direction": "bullish",
                                           "targets": [value["target"] if field == "target" else value["code"]]}],
                        "checks": {"quotes": [{"quote": value["quote"], "opportunity": 0, "verified": True}]}},
    }
    entry = events.Entry(analysis, [analysis])
    block = briefs.opportunity_block(entry, [value["account"]], date(2026, 1, 8), f"{RADAR}analysis/7?exp=1&sig=cd")
    glance = briefs.day_block(entry, {"top_opportunities": [{"analysis_id": 7, "title": value["title"]}]})
    return message.Message(f"【日报】2026-01-08：{value['title']}", briefs.failures_line([{"title": value["failed title"]}]),
                           LINK, (block, glance), link_label="查看日报")


@pytest.mark.parametrize("control", REORDERING, ids=REORDERING_IDS)
@pytest.mark.parametrize("field", LINE_FIELDS)
def test_a_control_in_any_field_leaves_every_form_of_the_line_reading_in_order(field: str, control: str) -> None:
    """An unclosed U+202E in a target made 「中微公司 688012」 read 「210886 司公微中」 to the end of its line,
    37% read %73 and 08:30 read 03:80: in the text, Markdown and HTML forms (WeCom, DingTalk, e-mail), and in
    the title, none is left."""
    for url in ("wecombot://ROBOTKEY1234567", "dingtalk://SECRET123456@TOKEN1234567", "mailto://user:pass@example.com"):
        title, body = push.fit(_message_with(field, control), push.channels_from([url])[0])
        assert reads_in_order(title) and reads_in_order(body), (url, title, body)
        assert LINE_FIELDS[field][1] in body, (url, body)
        assert title == "【日报】2026-01-08：中微公司订单大增 37%"


def test_the_joiners_and_selectors_of_an_emoji_stay() -> None:
    """The push keeps what an emoji is made of (and drops the override beside it)."""
    emoji = "❤️ 👨\u200d👩\u200d👧 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f 1️⃣ 中\u202e文"
    for form in message.FORMATS:
        assert message.render(message.Message("t", [emoji], LINK), form).startswith(emoji.replace("\u202e", ""))


def test_every_bidirectional_control_unicode_knows_is_dropped() -> None:
    """The embeddings, overrides and isolates as Python's Unicode database lists them, and the invisible marks
    (LRM, RLM, the Arabic letter mark, the Syriac abbreviation mark): none is left before 37%."""
    controls = [chr(c) for c in range(0x110000) if unicodedata.bidirectional(chr(c)) in (
        "LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI")]
    assert len(controls) == 9 and in_order("".join(controls) + "\u200e\u200f\u061c\u070f37%") == "37%"


def _sent(monkeypatch, url: str, sent: message.Message) -> tuple[str, str]:
    """(title, body) as the channel's plugin is handed them to send."""
    calls = _intercepted(monkeypatch)
    channel = push.channels_from([url])[0]
    assert push.send_one(channel, *push.fit(sent, channel)) is None
    [call] = calls
    return call["title"], call["body"]


@pytest.mark.parametrize("url", CHANNELS)
def test_codes_of_every_market_read_whole_and_shared_digits_say_their_exchange(monkeypatch, url):
    lead = {**_analysis(1, "指数与海外"), "summary": "上证指数 000001.SH 走弱，平安银行 000001.SZ、TSLA.US、AAPL.O 走强。"}
    lead["result_json"]["opportunities"][0]["targets"] = [
        "上证指数（000001.SH）", "000001.SZ", "特斯拉（TSLA.US）", "三星电子（005930.KS）"]
    block = briefs.opportunity_block(events.Entry(lead, [lead]), [], date(2026, 1, 8), LINK)
    _, body = _sent(monkeypatch, url, message.Message("t", [], LINK, (block,)))
    if "mdv=v2" in url:  # MarkdownV2 escapes every dot, and shows it
        body = re.sub(r"\\([.])", r"\1", body)
    assert "上证指数 SH000001 走弱，平安银行 SZ000001、TSLA、AAPL.O 走强。" in body
    assert "标的：上证指数 SH000001、SZ000001、特斯拉 TSLA、三星电子 005930.KS" in body
    assert "[.]" not in body


def _items(body: str) -> list[str]:
    """The parts of a body as its channel shows them apart (a blank line; in HTML two breaks)."""
    lines = re.sub(r"<br>\s*", "\n", body.replace("\r\n", "\n"))
    return [part for part in re.split(r"\n[ \t]*\n", lines) if "证据：" in part]


@pytest.mark.parametrize("url", CHANNELS)
def test_every_channel_shows_each_item_apart(monkeypatch, url):
    """Telegram's HTML has no <br> and apprise joined <br><br> into one break: its items ran together."""
    _, body = _sent(monkeypatch, url, _slot_message())
    items = _items(body)
    assert len(items) == body.count("证据：") >= 1 and all(item.count("证据：") == 1 for item in items), body


@pytest.mark.parametrize("url", ["slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ",
                                 "dingtalk://SECRET123456@TOKEN1234567", "dingtalk://SECRET123456@TOKEN1234567?format=markdown"])
def test_a_channel_whose_markup_has_no_escapes_shows_the_text_as_written(monkeypatch, url):
    """Slack's mrkdwn and DingTalk's Markdown have no backslash escapes: the reader saw \\*ST康美 and 3\\~5."""
    block = message.Block("*ST康美 重组落地，3~5 年 a_b `c` 见效", ("标的：*ST康美 600518",), LINK)
    _, body = _sent(monkeypatch, url, message.Message("t", [], LINK, (block,)))
    assert "*ST康美 重组落地，3~5 年 a_b `c` 见效\n标的：*ST康美 600518" in body and "\\" not in body, body


def test_ntfy_gets_what_its_server_shows_as_a_notification(monkeypatch):
    """ntfy's server takes a 4,096-byte message (a longer one it turns into an attachment), and apprise posts one
    whose JSON is over 8,000 characters (a Chinese character is six) as an attachment itself."""
    import requests

    posted: list[dict] = []

    def post(url, **kwargs):
        posted.append(kwargs)
        answer = requests.Response()
        answer.status_code, answer._content = 200, b'{"id": "x"}'
        return answer

    monkeypatch.setattr(requests, "post", post)
    [channel] = push.channels_from(["ntfy://topic"])
    for sent in (_big_message(), _alert()):
        assert push.send_one(channel, *push.fit(sent, channel)) is None
        data = posted.pop()
        assert "filename" not in (data.get("params") or {}) and len(data["data"]) <= 8000
        shown = json.loads(data["data"])["message"]
        assert len(shown.encode()) <= 4096 and shown.endswith(sent.link) and len(shown.encode()) > 1000


def test_an_emails_plain_text_part_keeps_the_radars_links(monkeypatch):
    import email
    import smtplib

    mails: list[str] = []

    class SMTP:
        def __init__(self, *args, **kwargs): pass
        def starttls(self, **kwargs): pass
        def login(self, *args): pass
        def sendmail(self, sender, to, text): mails.append(text) or {}
        def quit(self): pass

    monkeypatch.setattr(smtplib, "SMTP", SMTP)
    [channel] = push.channels_from(["mailto://user:pass@example.com"])
    sent = _slot_message()
    assert push.send_one(channel, *push.fit(sent, channel)) is None
    [mail] = mails
    parts = {p.get_content_type(): p.get_payload(decode=True).decode() for p in email.message_from_string(mail).walk()
             if not p.is_multipart()}
    for link in (sent.link, sent.more_link, *(b.link for b in sent.blocks)):
        assert link in parts["text/plain"] and html.escape(link) in parts["text/html"], link


def test_an_accounts_long_name_costs_no_item(monkeypatch):
    """A 100-character account name (its own line and the event's sources) cost an item on WeCom's 2048 bytes."""
    long_name = "长名" * 50
    entries = [events.Entry(a, [a]) for a in (_analysis(n, f"机会{n}") for n in (1, 2, 3))]
    for entry in entries:
        entry.lead.update(summary=f"机会{entry.lead['id']}。", mp_name=long_name)
        entry.lead["result_json"]["opportunities"][0]["targets"] = ["贵州茅台（600519.SH）"]
        entry.lead["result_json"]["checks"]["quotes"][0]["quote"] = "出厂价上调约20%"
    blocks = tuple(briefs.opportunity_block(e, [long_name, "第二个" + long_name], date(2026, 1, 8), LINK) for e in entries)
    _, body = _sent(monkeypatch, "wecombot://ROBOTKEY1234567", message.Message("t", [], LINK, blocks))
    assert body.count("证据：") == 3 and message.CUT_NOTE not in body
    assert f"{long_name[:briefs.ACCOUNT_CHARS - 1]}… · 13:01 发布" in body and long_name[:briefs.ACCOUNT_CHARS] not in body
    assert f"2 个公众号报道：{long_name[:briefs.ACCOUNT_CHARS - 1]}…、第二个" in body


def _day_message(scores: list[int], picks: list[int]) -> message.Message:
    """The 22:00 push's items (briefs.day_items, day_block) of analyses 1.. with ``scores``, in rank order, the
    day's report picking ``picks``."""
    entries = []
    for n, score in enumerate(scores, 1):
        lead = {**_analysis(n, f"机会{n}"), "score": score, "title": f"第{n}篇：" + "长" * 40}
        lead["result_json"]["checks"]["quotes"][0]["quote"] = f"第{n}条证据" + "据" * 60
        entries.append(events.Entry(lead, [lead]))
    digest_json = {"top_opportunities": [{"analysis_id": i, "title": f"精选{i}"} for i in picks]}
    items = briefs.day_items(digest_json, entries, 60)
    blocks = tuple(briefs.day_block(e, digest_json, f"{RADAR}analysis/{e.lead['id']}?exp=1&sig=cd") for e in items)
    return message.Message("【日报】2026-01-08：5 条机会（最高分 90）", ["分析 5 篇"], LINK, blocks, link_label="查看日报")


def test_the_daily_pushs_items_are_the_reports_picks_marked_then_by_score():
    body = message.render(_day_message([70, 90, 80, 85, 75], picks=[3]), message.TEXT)
    heads = [line for line in body.splitlines() if line.startswith("· ")]
    assert [h.split("：")[0] for h in heads] == ["· 【精选】精选3", "· 第2篇", "· 第4篇", "· 第5篇", "· 第1篇"]
    assert body.count(briefs.PICK) == 1


@pytest.mark.parametrize("url", ["wecombot://ROBOTKEY1234567", "json://localhost/hook", "bark://localhost/devicekey1234"])
def test_the_daily_pushs_items_keep_their_quotes_where_they_fit_and_every_item_before(monkeypatch, url):
    sent = _day_message([90, 85, 80, 75, 70], picks=[])
    _, body = _sent(monkeypatch, url, sent)
    quoted = [n for n in range(1, 6) if f"第{n}条证据" in body]
    assert body.count(" 分｜") == 5 and message.CUT_NOTE not in body  # every item, whole
    assert quoted == list(range(1, len(quoted) + 1)) and quoted, body  # the first ones keep their quotes
    if "wecombot" not in url:
        assert len(quoted) == 5


@pytest.mark.parametrize("url", CHANNELS)
def test_the_failed_articles_line_shows_a_look_alike_host_in_its_title_as_text(monkeypatch, url):
    """「未能分析…《…》」 quotes the WeRSS title as it came: its host names are defanged like any other text."""
    lines = briefs.failures_line([{"title": "速领 evil\u0301.com"}, {"title": "🎁.ws 红包"}])
    _, body = _sent(monkeypatch, url, message.Message("t", lines, LINK))
    body = re.sub(r"\\([.\[\]])", r"\1", body)  # Markdown's escapes of the dots and brackets
    assert "evil\u0301[.]com" in body and "🎁[.]ws" in body and "\u0301.com" not in body and "🎁.ws" not in body
