"""Pure decisions of a slot: push or stay silent, the message ids and the message texts. No I/O."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from include.radar.collect.coverage import Coverage
from include.radar.core.text import in_order
from include.radar.pushes import events

PUSH_OPPORTUNITY = "push_opportunity"
SKIP_PUSH = "skip_push"
BUILD_DAILY = "build_daily_report"

PUSH_MODES = ("auto", "force", "suppress")

# The trigger form's one choice (dags/opportunity_radar.py), and what each means in the raw params the
# steps read: the slot to run (named or not), and the push mode. API callers may still send push_mode.
ACTIONS = {
    "run": "按时段正常运行",
    "redo": "重做该时段（不推送）",
    "rebuild": "重建日报（不推送）",
    "force": "强制推送",
    "silent": "运行但不推送",
}


SUPPRESSED = "push suppressed by the trigger (action silent, redo or rebuild, or push_mode=suppress)"


class ActionError(ValueError):
    """The trigger's action cannot be carried out as asked (said in the run's log and on the failed task)."""


def apply_action(params: dict[str, Any], daily_slot: str) -> dict[str, Any]:
    """The params with the form's ``action`` turned into what the steps read (``slot``, ``push_mode``).

    - run: the slot the trigger stands for (or the date/slot filled in), pushed by the usual rules (:func:`decide`:
      at or above the threshold, not late, at most once per slot);
    - redo: the slot named (a date and/or a slot is required), analysed again, never pushed;
    - rebuild: the daily report of the date given (else the latest one), rebuilt, never pushed;
    - force: as run, and pushed whatever the score, lateness or run type (a force re-push is new);
    - silent: as run, pushed to nobody.
    """
    action = params.get("action") or "run"
    if action not in ACTIONS:
        raise ActionError(f"param action={action!r} is not one of {list(ACTIONS)}")
    out = dict(params)
    if action == "redo" and not (params.get("slot") or params.get("run_date")):
        raise ActionError("action=redo needs the slot (and/or the date) to redo: fill in 时段 or 日期")
    if action == "rebuild":
        out["slot"] = daily_slot
    if action == "force":
        out["push_mode"] = "force"
    elif action in ("silent", "redo", "rebuild"):
        out["push_mode"] = "suppress"
    return out


@dataclass(frozen=True)
class SlotSummary:
    """What this slot run produced: its analyses (not earlier ones) against the threshold, one candidate per
    real-world event (events.py)."""

    analysed: int
    failed: int
    above_threshold: int  # events, each counted once, whose lead has verified evidence and reaches the threshold
    max_score: int | None
    top_analysis_id: int | None
    top_summary: str | None
    threshold: int
    unverified: int = 0  # events at or above the threshold whose lead's evidence is not in its article
    top_verified: bool = True  # the top analysis's evidence is in its article (false only when none is)
    grouped: int = 0  # analyses folded into another analysis's entry (the same event)
    already_reported: int = 0  # events another slot's push already linked to (not pushed again)
    top_sources: list[str] = field(default_factory=list)  # the accounts that wrote about the top event
    top_watch: list[str] = field(default_factory=list)  # the reader's watchlist entries the top article names

    def as_xcom(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Decision:
    branch: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


def is_opportunity(analysis: dict[str, Any], threshold: int) -> bool:
    """An analysis that counts as an opportunity: at or above the threshold, with verified evidence, not a repost."""
    return analysis["score"] >= threshold and verified(analysis) and not analysis.get("reused_from_id")


def summarise(analyses: list[dict[str, Any]], failed: int, threshold: int,
              others: list[dict[str, Any]] | tuple[()] = (), reported: set[int] | frozenset[int] = frozenset()
              ) -> SlotSummary:
    """``analyses``: this slot run's analysis rows (store.analyses.slot_analyses); ``others``: the analyses of the same
    events by other slot runs (store.events.event_members); ``reported``: the events another run's push already linked
    to (store.events.pushed_events).

    Only news is pushed: a repost that reused an earlier analysis counts as analysed, never as an opportunity;
    one event is one candidate, led by its best-evidenced analysis (events.lead_key), and is not news again once
    another slot's push linked to it (one only counted can still be pushed); a lead whose evidence was not found
    in its article (``evidence_verified`` false) ranks below every verified one, never triggers the push, and is
    counted as ``unverified``.
    """
    mine = {a["id"] for a in analyses}
    fresh = [a for a in analyses if not a.get("reused_from_id")]
    entries = events.entries(fresh)
    candidates = [e for e in entries if e.event not in reported]
    top_entry = candidates[0] if candidates else (entries[0] if entries else None)
    top = top_entry.lead if top_entry else None
    sources: list[str] = []
    if top_entry is not None:
        earlier = [o for o in others if events.event_of(o) == top_entry.event and o["id"] not in mine]
        sources = list(dict.fromkeys([*top_entry.sources, *(o.get("mp_name") or "" for o in earlier)]))
    return SlotSummary(
        analysed=len(analyses),
        failed=failed,
        above_threshold=sum(1 for e in candidates if is_opportunity(e.lead, threshold)),
        max_score=top["score"] if top else None,
        top_analysis_id=top["id"] if top else None,
        top_summary=top["summary"] if top else None,
        threshold=threshold,
        unverified=sum(1 for e in candidates if e.lead["score"] >= threshold and not verified(e.lead)),
        top_verified=verified(top) if top else True,
        grouped=len(fresh) - len(entries),
        already_reported=len(entries) - len(candidates),
        top_sources=[s for s in sources if s],
        top_watch=[h for h in (top.get("watch_hits") or []) if isinstance(h, str)] if top else [],
    )


def verified(analysis: dict[str, Any]) -> bool:
    """Whether an analysis's evidence was found in its article (analyses from before the check count as found)."""
    return analysis.get("evidence_verified") is not False


def decide(summary: SlotSummary | None, *, is_daily: bool, run_type: str, push_mode: str, late: bool) -> Decision:
    """Which path the slot takes after its analyses.

    The daily slot always builds the report (pushing or not is the report path's own decision). A daytime
    slot pushes its best analysis when at least one is at or above the threshold, unless this is a backfill,
    a late start (a stale alert helps nobody: a slot the operator names long after its time is late, see
    open_slot) or a suppressed run (silent, redo, rebuild); a slot named on time pushes like a scheduled one,
    and the message log sends one alert per slot whoever asks. ``force`` pushes the best analysis of the
    slot whatever its score or lateness (the operator's force-publish).
    """
    if is_daily:
        return Decision(BUILD_DAILY, "the daily slot always builds and pushes the report")
    if summary is None:
        return Decision(SKIP_PUSH, "the slot summary is missing (an upstream step failed)")
    detail = {
        "analysed": summary.analysed,
        "above_threshold": summary.above_threshold,
        "max_score": summary.max_score,
        "threshold": summary.threshold,
        "top_analysis_id": summary.top_analysis_id,
    }
    would_push = summary.above_threshold > 0
    if push_mode == "suppress":
        return Decision(SKIP_PUSH, SUPPRESSED, detail)
    if run_type == "backfill":
        reason = "backfill runs never push" + (
            f"; would have pushed analysis {summary.top_analysis_id} (score {summary.max_score})" if would_push else ""
        )
        return Decision(SKIP_PUSH, reason, {**detail, "would_push": would_push})
    if push_mode == "force":
        if summary.top_analysis_id is None:
            return Decision(SKIP_PUSH, "force requested but this slot produced no analysis", detail)
        return Decision(PUSH_OPPORTUNITY, "push forced by the trigger's push_mode=force", detail)
    if not would_push and summary.already_reported:
        return Decision(SKIP_PUSH, f"{summary.already_reported} events of this slot were already pushed by an earlier "
                        "slot; nothing new at or above the threshold", {**detail, "already_reported": summary.already_reported})
    if not would_push:
        best = "no analyses" if summary.max_score is None else f"best score {summary.max_score}"
        return Decision(
            SKIP_PUSH,
            f"{summary.analysed} analysed, {best} < threshold {summary.threshold}: nothing to push",
            detail,
        )
    if late:
        return Decision(SKIP_PUSH, "slot started late: a stale alert is not sent (push_mode=force sends it)",
                        {**detail, "would_push": True})
    return Decision(PUSH_OPPORTUNITY, f"{summary.above_threshold} analyses ≥ {summary.threshold}", detail)


def msg_uuid(report_date: date | str, slot: str, push_type: str, target_url: str, channel: str = "", nonce: str = "") -> str:
    """The idempotency key of one message to one channel: sha1(report_date + slot + push_type + target_url).

    ``channel`` (a hash of the channel's URL) makes the key per channel, so a retry resends only to the
    channels that have not succeeded; ``nonce`` is empty except for an explicitly forced re-push.
    """
    parts = [str(report_date), slot, push_type, target_url, channel, nonce]
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()


def opportunity_title(slot: str, count: int, max_score: int) -> str:
    return f"【机会提醒】{slot} 发现 {count} 条（最高分 {max_score}）"


def daily_title(day: date | str, opportunities: int, max_score: int | None, *, late: bool = False) -> str:
    if opportunities > 0 and max_score is not None:
        title = f"【日报】{day}：{opportunities} 条机会（最高分 {max_score}）"
    else:
        title = f"【日报】{day}：今日无投资机会"
    return title + ("（延迟发送）" if late else "")


def daily_notes(*, built: bool, partial: bool, digest_json: Any) -> list[str]:
    """The lines under the daily push's counts, true to what the report is.

    "Generation failed" only when nothing could be built; a report built from what was done says how.
    """
    if not built:
        return ["日报生成失败，请稍后刷新"]
    if not partial:
        return []
    data = digest_json if isinstance(digest_json, dict) else {}
    notes = []
    if data.get("step_errors"):
        notes.append("本时段部分步骤出错")
    if data.get("source") == "fallback":
        notes.append("摘要由系统根据已完成的分析生成")
    if data.get("pending"):
        notes.append("未完成的分析由次日时段继续")
    return ["部分结果：" + "；".join(notes or ["详见日报页"])]


def coverage_line(stats: Any) -> list[str]:
    """The daily push's line saying what share of the accounts the day covered (coverage.py), when the report
    worked it out."""
    found = Coverage.from_stats(stats.get("coverage")) if isinstance(stats, dict) else None
    return [found.line()] if found else []


def top_lines(digest_json: Any, limit: int = 3) -> list[str]:
    """The daily push's lines for the report's top opportunities, one per event, with how many accounts
    reported it (``digest_json`` is stored LLM output: every field is checked)."""
    tops = digest_json.get("top_opportunities") if isinstance(digest_json, dict) else None
    lines = []
    for top in (tops if isinstance(tops, list) else [])[:limit]:
        if not isinstance(top, dict) or not isinstance(top.get("title"), str) or not top["title"].strip():
            continue
        sources = [s for s in top.get("sources") or [] if isinstance(s, str) and s] \
            if isinstance(top.get("sources"), list) else []
        follow_up = top.get("follow_up") if isinstance(top.get("follow_up"), str) else ""
        lines.append(f"· {first_sentence(top['title'], 40)}" + (f"（{len(sources)} 个公众号报道）" if len(sources) > 1 else "")
                     + (f"（后续报道：{follow_up[:11]} 已推送）" if follow_up else ""))
    return lines


def top_analysis_ids(digest_json: Any) -> list[int]:
    """The analysis ids of a report's top opportunities (stored LLM output: only whole numbers are taken)."""
    tops = digest_json.get("top_opportunities") if isinstance(digest_json, dict) else None
    ids = [top.get("analysis_id") for top in tops if isinstance(top, dict)] if isinstance(tops, list) else []
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and 0 < i < 10**18]


def sources_line(sources: list[str], limit: int = 4) -> list[str]:
    """The push's line naming the accounts that wrote about one event, when more than one did."""
    if len(sources) < 2:
        return []
    named = "、".join(sources[:limit]) + (f" 等 {len(sources)} 个" if len(sources) > limit else "")
    return [f"{len(sources)} 个公众号报道：{named}"]


def watch_line(hits: list[str], limit: int = 3) -> list[str]:
    """The push's line saying which of the reader's watchlist the article names, when it names any."""
    if not hits:
        return []
    return ["关注命中：" + "、".join(hits[:limit]) + (f" 等 {len(hits)} 项" if len(hits) > limit else "")]


def first_sentence(text: str | None, limit: int = 80) -> str:
    """The one-line summary of a push: the first sentence, at most ``limit`` characters."""
    if not text:
        return ""
    line = text.strip().splitlines()[0]
    for mark in "。！？!?":
        if mark in line:
            line = line.split(mark, 1)[0] + mark
            break
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ------------------------------------------------------------------------------------ links as text

# ``scheme://`` (any scheme; http and https become hxxp and hxxps, the defanging people recognise)
_SCHEME = re.compile(r"(?i)(?<![A-Za-z0-9+.-])(?!hxxps?:)([a-z][a-z0-9+.-]{0,31}):(?=\s*/\s*/)")
# schemes that act without ``//``
_BARE_SCHEME = re.compile(r"(?i)(?<![A-Za-z0-9+.-])(javascript|vbscript|data|file|mailto|tg|weixin|intent)(\s*):")
# a dot a linkifier would read as a host name's: two letters of a TLD after it (evil.example, www.x.cn, 163.com,
# 例子.中国) and before it what ends a label — a letter, digit, hyphen or underscore, a combining mark (IDNA keeps
# evil\u0301.com) or a symbol beyond ASCII (emoji domains: 🎁.ws); :func:`_label_end` tells which
_DOT = re.compile(r"(?<=.)\.(?=[^\W\d_]{2})", re.DOTALL)
# read as a dot in host names (︒ is 。 to NFKC, and browsers map 。 to a dot)
_IDEOGRAPHIC_DOT = re.compile(r"(?<=[A-Za-z0-9-])[。．｡︒](?=[A-Za-z]{2})")
_HXXP = {"http": "hxxp", "https": "hxxps"}
_IPV4 = re.compile(r"(?<!\d)\d{1,3}(?:\.\d{1,3}){3}(?!\d)")

# characters a host name can hide behind: no width, and a browser or a linkifier drops them (UTS 46 ignores
# them) — soft hyphen, joiners and zero-width spaces, bidirectional marks, invisible operators, variation
# selectors (FE00–FE0F, E0100–E01EF), the grapheme joiner, Mongolian selectors, Hangul fillers, tags.
# An emoji needs some of them (❤️, 👨‍👩‍👧, flags, the keycap 1️⃣): a run is dropped only beside what a host name
# is made of, and not before a keycap's enclosing mark.
_IGNORABLE = ("\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
              "\u3164\ufe00-\ufe0f\ufeff\uffa0\U0001bca0-\U0001bca3\U000e0000-\U000e0fff")
_HOSTLIKE = "A-Za-z0-9.\\-。．｡︒﹒․"
_HIDDEN = re.compile(f"(?<=[{_HOSTLIKE}])[{_IGNORABLE}]+(?!\u20e3)|[{_IGNORABLE}]+(?=[{_HOSTLIKE}])")
# what NFKC makes of look-alikes that matter in a host name: full-width letters and digits, ． ﹒ ․ and the like
_LOOKALIKE = re.compile(r"[^\x00-\u2000\u3000-\u9fff]")
# a security code with its exchange's suffix, written as the radar writes codes, dot-free, so that no channel links
# ``.sh``, ``.hk`` or ``.us`` (TLDs) as a host and the reader reads the code whole: 600519.SH → 600519, 0700.HK →
# 00700, TSLA.US → TSLA (upper case: a ticker; letters are no A-share or Hong Kong code); six digits starting 000
# name Shanghai's indices (上证指数 000001, 沪深300 000300) and Shenzhen's shares (平安银行 000001) alike, so
# they keep their exchange: SH000001, SZ000001
_CODE = re.compile(r"(?<![A-Za-z0-9_.])(?:(?i:([0-9]{6})\.(SH|SZ|BJ|SS)|([0-9]{1,5})\.HK)|([A-Z]{1,5})\.US)"
                   r"(?![A-Za-z0-9_-]|\.[A-Za-z0-9])")
SHARED_DIGITS = "000"
# what reads whole as written: the radar's own command, which its alerts tell the operator to run (python -m
# include.radar.cli check), a module path; and codes whose suffix is no TLD (AAPL.OQ, 005930.KS, 035720.KQ,
# 7203.T; the one-letter AAPL.O is no host anyway). Nothing joined to them (include.radar.cli.evil.com) is.
_WHOLE = re.compile(r"(?<![\w.-])include\.radar\.cli(?![\w.-])"
                    r"|(?<![\w.])(?:[0-9]{4,6}\.(?:KS|KQ|T)|[A-Z]{1,5}\.OQ)(?![\w-]|\.\w)")


def _plain(char: str) -> str:
    """``char`` as NFKC writes it when that is an ASCII letter, digit, dot or hyphen; else ``char``: Chinese
    full-width punctuation (，：（）) and the ellipsis (… is three dots to NFKC, and no host name) stay as the
    reader reads them."""
    folded = unicodedata.normalize("NFKC", char)
    return folded if char not in "…‥" and folded.isascii() and all(c.isalnum() or c in ".-" for c in folded) else char


def plain_codes(text: str) -> str:
    """``text`` with each exchange-suffixed security code written dot-free: 600519.SH → 600519, 0700.HK → 00700,
    TSLA.US → TSLA, 000001.SH → SH000001."""
    return _CODE.sub(_plain_code, text)


def _plain_code(m: re.Match[str]) -> str:
    if m[1]:
        exchange = "SH" if m[2].upper() == "SS" else m[2].upper()
        return exchange + m[1] if m[1].startswith(SHARED_DIGITS) else m[1]
    return m[3].zfill(5) if m[3] else m[4]


def _label_end(char: str) -> bool:
    """Whether ``char`` can end a host name's label (see _DOT)."""
    kind = unicodedata.category(char)
    return char in "-_" or char.isalnum() or kind[0] == "M" or (kind[0] == "S" and not char.isascii())


def _host_dots(text: str) -> str:
    return _DOT.sub(lambda m: "[.]" if _label_end(text[m.start() - 1]) else ".", text)


# what a channel reads as a mention that notifies people: Slack's <!channel> <!here> <@U123>, WeCom's <@userid>,
# Feishu's <at user_id="all">, and @everyone / @all / @username in Discord, Telegram, DingTalk and the rest
_MENTION_OPEN = re.compile(r"<(?=[!@]|at\b)", re.IGNORECASE)


def unmention(text: str) -> str:
    """``text`` with nothing a channel would read as a mention: ``@`` written full-width (＠), and the ``<`` that
    opens Slack's and Feishu's mention tags too (＜), so an article cannot make a push notify a whole group."""
    return _MENTION_OPEN.sub("＜", text).replace("@", "＠")


def defang(text: str) -> str:
    """``text`` with every URL, host name and e-mail domain turned into text no channel makes a link of:
    ``https://evil.example/x`` → ``hxxps://evil[.]example/x``, ``javascript:`` → ``javascript[:]``; look-alikes
    first written plainly (``ｅｖｉｌ．ｃｏｍ``, ``evil﹒com``, ``evil\ufe0f.com``, ``evil︒com`` are ``evil[.]com``).

    WeCom, Telegram and e-mail clients link bare URLs and host names by themselves, so an article could make the
    model write a phishing URL into a push. The push's own link is added after, untouched. Idempotent. A security
    code is no host name: ``600519.SH`` (``.sh`` is a TLD) is written ``600519`` (plain_codes), and the radar's
    own command ``include.radar.cli`` stays whole (nothing joined to it, ``include.radar.cli.evil.com``, does).
    No mention either (:func:`unmention`), nor anything that reorders the line (core.text.in_order).
    """
    text = in_order(text)
    if _LOOKALIKE.search(text):
        text = "".join(map(_plain, text))
    text = plain_codes(_HIDDEN.sub("", text))
    text = _IPV4.sub(lambda m: m.group(0).replace(".", "[.]"), text)
    text = _SCHEME.sub(lambda m: _HXXP[m.group(1).lower()] + ":" if m.group(1).lower() in _HXXP else m.group(1) + "[:]",
                       text)
    text = _BARE_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}[:]", text)
    text = _IDEOGRAPHIC_DOT.sub("[.]", text)
    kept, end = [], 0
    for whole in _WHOLE.finditer(text):
        kept += [_host_dots(text[end:whole.start()]), whole[0]]
        end = whole.end()
    return unmention("".join(kept) + _host_dots(text[end:]))


def daily_push_plan(slot: dict[str, Any]) -> tuple[bool, str]:
    """Pure: whether the daily report is pushed by this run, and why.

    A manual run whose logical date is in the past is a manual backfill (open_slot.dated_in_the_past); a daily
    slot named in the form's fields pushes as the scheduled one would, once (the message log holds it).
    """
    if slot["push_mode"] == "suppress":
        return False, SUPPRESSED
    if slot["run_type"] == "backfill":
        return False, "backfill runs build reports and push nothing"
    if slot["push_mode"] == "force":
        return True, "push forced by the trigger's push_mode=force"
    if slot.get("past_dated"):
        return False, "a manual run dated in the past (a manual backfill): pushed only with push_mode=force"
    return True, "the daily report is always pushed" + (" (late)" if slot["late"] else "")
