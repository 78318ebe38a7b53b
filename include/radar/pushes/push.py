"""Deliver a message to every configured channel through apprise, exactly once per channel, in its own form.

Each (message, channel) pair has a unique msg_uuid (decide.msg_uuid), independent of the text: a pending row
(with the text as fitted for its channel: :func:`channel_form`, :func:`fit`) is inserted under it before sending
(a conflict: already handled), ``send_started_at`` is committed just before the channel is called, and the
answer marks it sent or failed, so a retry resends only where it has not succeeded. apprise's result is checked
and its log captured and redacted (no channel secret reaches a log). A dead sender's row is settled by
:func:`sweep` after :data:`SWEEP_AFTER`: never started, it is delivered now (or, a stale alert, failed); started
without an answer, it is marked *unknown* and never resent (a duplicate is worse than a miss for this reader),
and the operator is told.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from include.radar import store
from include.radar.core import http, redact
from include.radar.core.slots import SHANGHAI
from include.radar.pushes.decide import defang, msg_uuid
from include.radar.pushes.message import HTML, MAIL_HTML, MARKDOWN, TELEGRAM_HTML, TEXT, Message, fitted

log = logging.getLogger(__name__)
# apprise and urllib3 (under apprise's requests) log channel URLs and request paths with their tokens
for _name in ("apprise", "urllib3.connectionpool"):
    redact.scrub_logger(_name)

# A channel gets the message in the form it shows (Markdown where it renders Markdown, HTML for e-mail, plain
# text elsewhere) within the sizes its apprise plugin states (body_maxlen, title_maxlen), measured on what
# apprise hands the plugin after folding the title in and converting to its dialect. What the plugins do not
# say — bytes: WeCom's robot takes 2048 bytes of text (apprise sends it text and states 2048 characters),
# Feishu/Lark and DingTalk a 20 KB body; characters: Bark's plugin states no limit of its own (apprise's default
# of 32768 is no service's); titles: ServerChan's holds 32 characters, Bark's is kept to 100.
# ntfy's server takes a message of 4096 bytes (a longer one becomes an attachment), and apprise posts one whose
# JSON is over its plugin's ntfy_json_upstream_size_limit as an attachment (Form.json_chars)
BYTE_LIMITS = {"wecombot": 2048, "feishu": 20000, "lark": 20000, "dingtalk": 20000, "ntfy": 4096}
CHAR_LIMITS = {"bark": 2000}
TITLE_LIMITS = {"schan": 32, "bark": 100}
DEFAULT_CHAR_LIMIT = 4000  # a plugin that states no limit and is not listed above
# ServerChan shows its text (desp) as Markdown, though apprise's plugin declares plain text: it is sent
# Markdown, escaped, declared as text (apprise converts nothing)
MARKDOWN_AS_TEXT = {"schan"}
# plain text, whatever the URL asks: Slack's mrkdwn and DingTalk's Markdown have no escapes (a CommonMark escape
# arrives as a backslash the reader sees: \*ST康美), so what an article wrote could not be shown as itself
PLAIN_TEXT = {"slack", "dingtalk"}
# the HTML a channel needs of its own (message.TELEGRAM_HTML, MAIL_HTML)
HTML_AS = {"tgram": TELEGRAM_HTML, "mailto": MAIL_HTML, "mailtos": MAIL_HTML}
# generic webhooks: plain text, unless their URL asks for a format (``?format=markdown``)
GENERIC = {"json", "jsons", "form", "forms", "xml", "xmls"}
# a pending row this old was left by a sender that never came back (a send takes seconds: apprise's own
# timeouts are well under a minute)
SWEEP_AFTER = timedelta(minutes=5)


class PushConfigError(RuntimeError):
    """No usable push channel is configured."""


class PushFailed(RuntimeError):
    """At least one channel failed; the failures are recorded and a retry resends only to those."""


@dataclass(frozen=True)
class Channel:
    url: str  # secret: never logged or stored
    label: str  # scheme://host with credentials removed
    key: str  # stable hash of the URL, part of the msg_uuid

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0].lower()


@dataclass(frozen=True)
class Occasion:
    """What a message is sent for, as its rows record it: the day, the slot, the kind, the page it links to and
    the slot run. ``identity`` is what makes two messages the same one (default: ``target_url``): a slot's
    opportunity alert passes "" so the slot itself is the identity, and a rerun whose top analysis changed sends
    nothing; ``nonce`` is empty except for a forced re-push."""

    report_date: date
    slot: str
    push_type: str
    target_url: str
    slot_run_id: int | None
    nonce: str = ""
    identity: str | None = None

    def uuid(self, channel: Channel) -> str:
        identity = self.target_url if self.identity is None else self.identity
        return msg_uuid(self.report_date, self.slot, self.push_type, identity, channel.key, self.nonce)


@dataclass
class DeliveryReport:
    sent: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # of the skipped: another sender has it in hand

    def as_xcom(self) -> dict[str, Any]:
        return {"sent": self.sent, "failed": self.failed, "skipped": self.skipped}


def channels_from(urls: list[str]) -> list[Channel]:
    result = []
    for raw in urls:
        url = raw.strip()
        if not url:
            continue
        result.append(Channel(url=url, label=_label(url), key=hashlib.sha256(url.encode()).hexdigest()[:16]))
    return result


def parse_urls(value: Any) -> list[str]:
    """apprise URLs from a connection: extra ``{"urls": [...]}`` or a comma/space/newline separated string."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return [p for p in re.split(r"[\s,]+", str(value)) if p]


def _label(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].split("?", 1)[0]
    host = host.rsplit("@", 1)[-1]
    if scheme.lower() in ("json", "jsons", "form", "forms", "xml", "xmls", "mailto", "mailtos"):
        return f"{scheme}://{host}"
    return f"{scheme}://"  # the "host" of token-style URLs is the secret itself


@dataclass(frozen=True)
class Form:
    """How a channel gets a message: the form it is written in, the format apprise is told, the sizes."""

    written: str  # one of message.FORMATS
    declared: str  # the body_format apprise is told (MARKDOWN_AS_TEXT: text, so that apprise converts nothing)
    body_chars: int
    body_bytes: int | None = None
    title_chars: int | None = None  # None: the plugin folds the title into the body
    plugin: Any = None  # the apprise plugin (None: the URL is not one apprise knows)
    json_chars: int | None = None  # ntfy: the most its posted JSON may hold (apprise's ensure_ascii json.dumps)

    def prepared(self, title: str, body: str) -> list[tuple[str, str]]:
        """(title, body) of each call of the plugin's ``send()`` for this message: the title folded in, the
        body converted to the plugin's dialect — apprise's own preparation, without sending. Should apprise's
        private preparation ever change, the title is counted in the body and half the body again for the
        dialect."""
        if self.plugin is not None:
            with contextlib.suppress(Exception):
                return [(c["title"], c["body"]) for c in
                        self.plugin._build_send_calls(body=body, title=title, body_format=self.declared)]
        return [("", (title + "\r\n" if title else "") + body + " " * (len(body) // 2))]

    def fits(self, title: str, body: str) -> bool:
        """Whether every piece the plugin would send is within its sizes (a plugin that shares its limit between
        title and body, DingTalk's, counts both)."""
        for sent_title, sent_body in self.prepared(title, body):
            text = sent_body + (sent_title + "\r\n" if self.plugin is not None and self.plugin.overflow_amalgamate_title
                                else "")
            if len(text) > self.body_chars or (self.body_bytes and len(text.encode("utf-8")) > self.body_bytes):
                return False
            if self.title_chars is not None and len(sent_title) > self.title_chars:
                return False
            if self.json_chars is not None and len(json.dumps({"topic": max(self.plugin.topics, key=len, default=""),
                                                               "title": sent_title, "message": sent_body})) > self.json_chars:
                return False
        return True


def _own(plugin: Any, name: str) -> Any:
    """The plugin class's own value of ``name`` (not apprise's default for every plugin), else None."""
    from apprise.plugins.base import NotifyBase

    for cls in type(plugin).__mro__:
        if cls is NotifyBase:
            return None
        if name in vars(cls):
            return getattr(plugin, name)
    return None


def _formats(plugin: Any) -> tuple[str, ...]:
    declared = plugin.notify_format
    return tuple(str(getattr(f, "value", f)) for f in (declared if isinstance(declared, tuple | list) else [declared]))


def _apprise_url(channel: Channel) -> str:
    """The URL apprise is given: a PLAIN_TEXT channel's without its ``format=`` (apprise would convert the
    plain text into that format)."""
    if channel.scheme not in PLAIN_TEXT or "?" not in channel.url:
        return channel.url
    base, query = channel.url.split("?", 1)
    kept = "&".join(p for p in query.split("&") if not p.lower().startswith("format="))
    return f"{base}?{kept}" if kept else base


def channel_form(channel: Channel) -> Form:
    """The form and sizes of ``channel``: the format its plugin renders by default (Telegram and e-mail HTML,
    Slack Markdown), Markdown or HTML rather than plain text where the plugin renders them too (DingTalk and
    Discord: Markdown); a generic webhook plain text; a URL's own ``?format=`` wins, but for PLAIN_TEXT's
    channels."""
    with _quiet_apprise():
        import apprise

        plugin = apprise.Apprise.instantiate(_apprise_url(channel), suppress_exceptions=True)
    scheme = channel.scheme
    if plugin is None:
        return Form(TEXT, TEXT, CHAR_LIMITS.get(scheme, DEFAULT_CHAR_LIMIT), BYTE_LIMITS.get(scheme),
                    TITLE_LIMITS.get(scheme))
    formats = _formats(plugin)
    chosen = str(getattr(plugin.resolve_format(None), "value", formats[0]))  # the URL's ?format=, else the default
    if chosen == TEXT and scheme not in GENERIC and "format=" not in channel.url.split("?", 1)[-1]:
        chosen = next((f for f in (MARKDOWN, HTML) if f in formats), chosen)
    if scheme in PLAIN_TEXT:
        chosen = TEXT  # (and the URL's format= is not given to apprise: _apprise_url)
    written = MARKDOWN if scheme in MARKDOWN_AS_TEXT and chosen == TEXT else chosen
    written = HTML_AS.get(scheme, written) if written == HTML else written
    title_limit = plugin.title_maxlen if plugin.title_maxlen > 0 else None
    if title_limit is not None and scheme in TITLE_LIMITS:
        title_limit = min(title_limit, TITLE_LIMITS[scheme])
    body_limit = _own(plugin, "body_maxlen") or CHAR_LIMITS.get(scheme, DEFAULT_CHAR_LIMIT)
    return Form(written, chosen, body_limit, BYTE_LIMITS.get(scheme), title_limit, plugin,
                _own(plugin, "ntfy_json_upstream_size_limit"))


def fit(message: Message, channel: Channel) -> tuple[str, str]:
    """Title and body for ``channel``: written in its form (message.py: escaped, defanged), cut between blocks
    to fit what its plugin takes, the title shortened where the channel's title field is shorter; the link
    always whole."""
    form = channel_form(channel)
    title = defang(message.title)
    if form.title_chars is not None and len(title) > form.title_chars:
        title = title[: form.title_chars - 1] + "…"
    return title, fitted(message, form.written, lambda body: form.fits(title, body))


def secret_parts(channel: Channel, min_chars: int = 6) -> set[str]:
    """The pieces of a channel URL that may be secret: every part but the host and port of webhook URLs."""
    parts = {p for p in re.split(r"[:/@?&=#,]+", channel.url.split("://", 1)[-1]) if len(p) >= min_chars}
    public = set(channel.label.split("://", 1)[-1].split(":"))
    return parts - public


def _redact(text: str, channel: Channel) -> str:
    for secret in sorted(secret_parts(channel), key=len, reverse=True):
        text = text.replace(secret, "***")
    return redact.scrub(text)


@contextlib.contextmanager
def _quiet_apprise() -> Iterator[Any]:
    """apprise's log lines (they name channel URLs) go to a private capture only while it works."""
    import apprise

    apprise_log = logging.getLogger("apprise")
    propagate, apprise_log.propagate = apprise_log.propagate, False
    try:
        with apprise.LogCapture(level=logging.INFO) as captured:
            yield captured
    finally:
        apprise_log.propagate = propagate


def send_one(channel: Channel, title: str, body: str) -> str | None:
    """Send through apprise; None on success, else a redacted error.

    apprise names the channel URL in its log lines (at DEBUG and INFO, when it loads the URL and when it
    posts), and the HTTP library below it logs request paths that hold webhook tokens: while it sends, its
    lines go to a private capture only, and a scrubbing filter guards both loggers for good.
    """
    import apprise  # half a second of imports, paid only by the tasks that push

    with _quiet_apprise() as captured, http.requests_capped(http.REQUESTS_PUSH_MAX_BYTES):
        # the channel's answer is read through requests: capped by what it decodes to (include/radar/core/http.py)
        form = channel_form(channel)
        if form.plugin is None:
            return f"{channel.label}: not a valid apprise URL"
        try:
            # the body is already in the channel's form (fit): declared so, apprise converts nothing but the
            # dialect of its Markdown
            ok = form.plugin.notify(body=body, title=title, body_format=apprise.NotifyFormat(form.declared))
        except Exception as exc:  # a plugin bug must not stop the other channels
            ok = False
            captured.write(f"{exc.__class__.__name__}: {exc}\n")
    if ok:
        return None
    lines = [ln for ln in captured.getvalue().splitlines() if ln.strip()]
    detail = " / ".join(lines[-3:]) or "delivery failed"
    return _redact(f"{channel.label}: {detail}", channel)[:1000]


def deliver(connect: Callable[[], Any], channels: list[Channel], message: Message, occasion: Occasion, *,
            sender: Callable[[Channel, str, str], str | None] = send_one) -> DeliveryReport:
    """Send ``message`` once to each channel, for ``occasion``; record every outcome. Raises nothing for channel
    failures."""
    if not channels:
        raise PushConfigError("no push channel configured: add apprise URLs to the radar_push connection (extra.urls)")
    report = DeliveryReport()
    for channel in channels:
        uuid = occasion.uuid(channel)
        title, body = fit(message, channel)
        with connect() as conn:
            claimed = store.pushes.claim_notification(
                conn,
                {
                    "msg_uuid": uuid, "report_date": occasion.report_date, "slot": occasion.slot,
                    "push_type": occasion.push_type, "target_url": occasion.target_url, "channel": channel.label,
                    "slot_run_id": occasion.slot_run_id, "title": title, "channel_key": channel.key, "body": body,
                    "shown_ids": list(message.shown) or None,
                },
            )
        if claimed is None:
            with connect() as conn:
                existing = store.pushes.notification(conn, uuid)
            if (existing and existing["status"] == store.common.NOTE_PENDING and existing["send_started_at"] is None
                    and existing["channel_key"] is not None):
                # its sender died between its claim and its send (this is its task's retry, say): deliver it
                log.info("%s to %s: claimed earlier and never sent; sending it now", occasion.push_type, channel.label)
                _send_claimed(connect, channel, existing, sender, report)
                continue
            state = {store.common.NOTE_SENT: "already sent", store.common.NOTE_PENDING: "being sent by another sender",
                     store.common.NOTE_UNKNOWN: "sent earlier with its outcome unknown"}.get(
                existing["status"] if existing else -1, "handled")
            log.info("%s to %s: %s, not sent again", occasion.push_type, channel.label, state)
            report.skipped.append(channel.label)
            if existing and existing["status"] == store.common.NOTE_PENDING:
                report.pending.append(channel.label)
            continue
        _send_claimed(connect, channel, claimed, sender, report)
    return report


def _send_claimed(connect: Callable[[], Any], channel: Channel, row: dict[str, Any],
                  sender: Callable[[Channel, str, str], str | None], report: DeliveryReport) -> None:
    """Send a claimed row's text to its channel: its send start committed first (only one sender wins it),
    then the channel's answer recorded."""
    with connect() as conn:
        mine = store.pushes.start_send(conn, row["msg_uuid"])
    if not mine:
        log.info("%s to %s: another sender started it first", row["push_type"], channel.label)
        report.skipped.append(channel.label)
        report.pending.append(channel.label)
        return
    error = sender(channel, row["title"], row["body"]) if row.get("body") is not None else (
        f"{channel.label}: no text was recorded with this message")
    with connect() as conn:
        store.pushes.finish_notification(conn, row["msg_uuid"], error)
    if error is None:
        log.info("pushed %r to %s", row["title"], channel.label)
        report.sent.append(channel.label)
    else:
        log.warning("push %r to %s failed: %s", row["title"], channel.label, error)
        report.failed.append(channel.label)


@dataclass
class SweepReport:
    """What a sweep did with the pending rows senders left behind."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)  # could not be delivered (recorded as failed)
    unknown: list[dict[str, Any]] = field(default_factory=list)  # marked unknown by this sweep

    def __bool__(self) -> bool:
        return bool(self.sent or self.failed or self.unknown)


def sweep(
    connect: Callable[[], Any],
    channels: list[Channel],
    *,
    stale_after: timedelta,
    older_than: timedelta = SWEEP_AFTER,
    sender: Callable[[Channel, str, str], str | None] = send_one,
    now: datetime,
) -> SweepReport:
    """Account for every pending row older than ``older_than`` (see the module docstring).

    ``channels``: every channel a message may have gone to (the reader's and the operator's), found again by
    their key; ``stale_after``: how late a daytime opportunity alert may still go out (late_after_minutes),
    counted from its claim — later, it is marked failed instead. Rows whose channel is gone, or that carry no
    text, are marked failed. Raises nothing for channel failures.
    """
    by_key = {c.key: c for c in channels}
    report = SweepReport()
    with connect() as conn:
        rows = store.pushes.stale_notifications(conn, older_than)
    for row in rows:
        label = f"{row['push_type']} 「{row['title']}」 to {row['channel']}"
        if row["send_started_at"] is not None or row["channel_key"] is None:  # a row without a key: an older claim
            started = row["send_started_at"] or row["updated_at"]
            error = (f"the send started at {started.astimezone(SHANGHAI):%Y-%m-%d %H:%M:%S} (Asia/Shanghai) and its "
                     "sender never recorded an answer: delivery unknown, not resent automatically")
            with connect() as conn:
                marked = store.pushes.mark_unknown(conn, row["msg_uuid"], older_than, error)
            if marked is not None:
                log.warning("%s: its send started and no answer was recorded: delivery unknown, not resent", label)
                report.unknown.append(marked)
            continue
        channel = by_key.get(row["channel_key"])
        late = now - row["updated_at"]
        why = None
        if channel is None:
            why = "its channel is no longer configured"
        elif row["body"] is None:
            why = "no text was recorded with it"
        elif row["push_type"] == "opportunity" and late > stale_after:
            why = f"an opportunity alert {int(late.total_seconds() // 60)} minutes late is stale"
        if why is not None:
            with connect() as conn:
                if store.pushes.start_send(conn, row["msg_uuid"]):  # this sweep settles it, nobody else
                    store.pushes.finish_notification(conn, row["msg_uuid"], f"not delivered after its sender was lost: {why}")
                    report.failed.append({**row, "error": why})
                    log.warning("%s: claimed, never sent, and %s: marked failed", label, why)
            continue
        assert channel is not None
        log.warning("%s: claimed %s ago and never sent (its sender was lost): sending it now", label, late)
        delivery = DeliveryReport()
        _send_claimed(connect, channel, row, sender, delivery)
        if delivery.sent:
            report.sent.append(row)
        elif delivery.failed:
            with connect() as conn:
                report.failed.append(store.pushes.notification(conn, row["msg_uuid"]) or row)
    return report
