"""What an evaluation found, side by side with the current set-up: agreement, the reader's verdicts, cost and time,
and at a glance (:class:`Glance`): both set-ups, the cost ratio and a month at the reader's volume, the
opportunities missed and added, the rank agreement, whether the reader's verdicts are enough to judge. The page
(web/routes/evaluation.py) and the CLI (``cli evaluation``) show this one summary.

Only articles both set-ups answered are compared; an article the candidate failed on counts in its billed cost
and its failures, never as a disagreement. The verdict's money prices both set-ups' compared answers at their
list (off-peak) rates, whatever hour each was billed at, over the articles both answered and were billed for;
beside it, what was billed: the stored analyses' cost, and the candidate's whole line in the spend ledger, failed
ladders included. Opportunities missed and added are counted as the slots would push them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from include.radar import store
from include.radar.core import pricing
from include.radar.core.pricing import format_money
from include.radar.core.settings import Settings
from include.radar.evaluation import agreement, job, picks
from include.radar.market import instruments, outcomes

DISAGREEMENTS = 10
VOLUME_DAYS = 30
DEFAULT_PEAK = f"{pricing.DEFAULT_PEAK_HOURS} ×2"
PUSH_THRESHOLD = Settings.model_fields["push_score_threshold"].default
MIN_COMPARED = 10  # articles both set-ups answered and were billed for, before one is called cheaper or dearer
ENDED = {"cap": "the cap was reached", "time": "the run's time ran out", "held": "another run holds some articles",
         "failing": "the endpoint failed", "config": "the endpoint refused its configuration",
         "crashed": "an article crashed", "over_cap": "the endpoint reported more than a call reserved"}


@dataclass(frozen=True)
class Side:
    """Cost and time of one set-up over the compared articles."""

    articles: int
    opportunities: int
    prompt_tokens: int
    cache_hit_tokens: int
    completion_tokens: int
    cost: float
    latency_ms: float | None  # mean per article
    repaired: int  # answers that took more than one call (an invalid answer, or evidence asked again)
    evidence_refused: int  # answers whose quotes were not found in the article
    listed: float = 0.0  # its compared answers at the list (off-peak) rates, the one table both are compared at

    @property
    def cost_per_opportunity(self) -> float | None:
        return self.listed / self.opportunities if self.opportunities else None


@dataclass(frozen=True)
class Disagreement:
    content_item_id: int
    analysis_id: int | None
    title: str
    current: dict[str, Any]
    candidate: dict[str, Any]
    gap: int
    differs: tuple[str, ...] = ()  # what differs: call, type, direction, score


@dataclass(frozen=True)
class Setup:
    """A set-up as the summary names it; ``thinking`` None: not known (the analyses do not say)."""

    model: str
    thinking: bool | None
    effort: str | None
    prompt: str  # analysis-v3

    @property
    def label(self) -> str:
        mode = "thinking unknown" if self.thinking is None else (
            f"thinking {self.effort or 'on'}" if self.thinking else "no thinking")
        return f"{self.model} ({mode}, {self.prompt})"


@dataclass(frozen=True)
class Glance:
    """The deciding figures, together: what an article costs each set-up over the ``billed`` articles (both
    answered and billed for them), their ratio (none below ``MIN_COMPARED`` of them), a month of each at the
    reader's volume (paid analyses a day over the last ``VOLUME_DAYS`` days before the evaluation), and whether
    the reader's verdicts are enough to judge."""

    current: Setup
    candidate: Setup
    per_article: float | None
    candidate_per_article: float | None
    per_day: float | None
    days: int
    verdicts_enough: bool
    billed: int = 0
    billed_current: float = 0.0  # what those articles were billed, each at the rates of its hour
    billed_candidate: float = 0.0
    peak: str = DEFAULT_PEAK  # the window the list rates leave out, and its multiplier

    @property
    def ratio(self) -> float | None:
        if self.billed >= MIN_COMPARED and self.per_article and self.candidate_per_article is not None:
            return self.candidate_per_article / self.per_article
        return None

    def month(self, per_article: float | None) -> float | None:
        return None if per_article is None or self.per_day is None else per_article * self.per_day * 30


@dataclass
class Summary:
    evaluation: dict[str, Any]
    compared: int = 0
    failed: int = 0
    pending: int = 0
    confusion: agreement.Confusion = field(default_factory=agreement.Confusion)
    spearman: float | None = None
    mean_abs_diff: float | None = None
    band_agreement: float | None = None
    type_agreement: float | None = None
    direction_agreement: float | None = None
    directions_compared: int = 0
    target_overlap: float | None = None
    targets_compared: int = 0
    reader_current: agreement.Auc = field(default_factory=lambda: agreement.Auc(None, None, None, 0, 0))
    reader_candidate: agreement.Auc = field(default_factory=lambda: agreement.Auc(None, None, None, 0, 0))
    current: Side | None = None
    candidate: Side | None = None
    candidate_ledger: float = 0.0
    disagreements: list[Disagreement] = field(default_factory=list)
    points: list[tuple[int, int]] = field(default_factory=list)  # (current score, candidate score)
    market: picks.Market | None = None
    glance: Glance | None = None
    current_estimated: bool = False  # the current set-up's money priced by a table without published prices
    # the calls as the slots would push them (an opportunity at or above the threshold, its evidence found): the
    # opportunities missed and added
    pushed: agreement.Confusion = field(default_factory=agreement.Confusion)


def _opportunities(value: Any) -> list[dict[str, Any]]:
    items = value.get("opportunities") if isinstance(value, dict) else None
    return [o for o in items or [] if isinstance(o, dict)]


def instrument_keys(opportunities: Sequence[Mapping[str, Any]], names: Mapping[str, list[Any]] | None) -> set[str]:
    """Every instrument the answer's targets name, resolved as the track record resolves them."""
    keys: set[str] = set()
    for opp in opportunities:
        kind = str(opp.get("type") or "other")
        for target in (t for t in opp.get("targets") or [] if isinstance(t, str) and t.strip()):
            found = instruments.parse_code(target) or instruments.INDEX_NAMES.get(instruments.normalise(target))
            if found is None and kind == "sector":
                found = instruments.sector_of(target)[0]
            if found is None and kind != "sector" and names is not None:
                found = instruments.by_name(target, names)[0]
            if found is not None:
                keys.add(found.key)
    return keys


def _direction(value: Any) -> str | None:
    opps = _opportunities(value)
    return str(opps[0].get("direction") or "watch") if opps else None


def summarise(evaluation: dict[str, Any], rows: list[dict[str, Any]], names: Mapping[str, list[Any]] | None,
              ledger_cost: float = 0.0, settings: Any = None) -> Summary:
    """The summary of one evaluation from its rows (store.evaluations.pairs); pure (``settings``: the current
    model's list rates as the deployment prices it)."""
    done = [r for r in rows if r["status"] == store.evaluations.DONE and r["analysis_id"] is not None]
    out = Summary(evaluation, compared=len(done), failed=sum(1 for r in rows if r["status"] == store.evaluations.FAILED),
                  pending=sum(1 for r in rows if r["status"] in (store.evaluations.PENDING, store.evaluations.CLAIMED)),
                  candidate_ledger=ledger_cost)
    current = [int(r["b_score"]) for r in done]
    cand = [int(r["c_score"]) for r in done]
    out.points = list(zip(current, cand, strict=True))
    out.confusion = agreement.confusion([(bool(r["b_opp"]), bool(r["c_opp"])) for r in done])
    threshold = settings.push_score_threshold if settings is not None else PUSH_THRESHOLD
    out.pushed = agreement.confusion([(pushable(r, "b", threshold), pushable(r, "c", threshold)) for r in done])
    out.spearman = agreement.spearman(current, cand)
    out.mean_abs_diff = agreement.mean_abs_diff(current, cand)
    out.band_agreement = agreement.share([outcomes.band_of(a) == outcomes.band_of(b) for a, b in out.points])
    out.type_agreement = agreement.share([r["b_type"] == r["c_type"] for r in done])
    directions = [(_direction(r["b_json"]), _direction(r["c_json"])) for r in done if r["b_opp"] and r["c_opp"]]
    directions = [(a, b) for a, b in directions if a and b]
    out.direction_agreement, out.directions_compared = agreement.share([a == b for a, b in directions]), len(directions)
    overlaps = [agreement.jaccard(instrument_keys(_opportunities(r["b_json"]), names),
                                  instrument_keys(_opportunities(r["c_json"]), names)) for r in done]
    measured = [o for o in overlaps if o is not None]
    out.target_overlap = sum(measured) / len(measured) if measured else None
    out.targets_compared = len(measured)
    out.reader_current = _separation(done, "b_score")
    out.reader_candidate = _separation(done, "c_score")
    rates = list_rates(evaluation, current_setup(evaluation, rows).model, settings)
    out.current, out.candidate = _side(done, "b", rates[0]), _side(done, "c", rates[1], ledger_cost)
    out.disagreements = _disagreements(done)
    return out


def _separation(rows: list[dict[str, Any]], key: str) -> agreement.Auc:
    return agreement.auc([r[key] for r in rows if r["verdict"] == "up"], [r[key] for r in rows if r["verdict"] == "down"])


def _side(rows: list[dict[str, Any]], p: str, rates: pricing.Rates, ledger_cost: float | None = None) -> Side:
    latencies = [int(r[f"{p}_latency"] or 0) for r in rows]
    return Side(
        articles=len(rows), opportunities=sum(1 for r in rows if r[f"{p}_opp"]),
        prompt_tokens=sum(int(r[f"{p}_prompt"] or 0) for r in rows),
        cache_hit_tokens=sum(int(r[f"{p}_hit"] or 0) for r in rows),
        completion_tokens=sum(int(r[f"{p}_completion"] or 0) for r in rows),
        cost=float(ledger_cost) if ledger_cost is not None else sum(float(r[f"{p}_cost"] or 0) for r in rows),
        latency_ms=sum(latencies) / len(latencies) if latencies else None,
        repaired=sum(1 for r in rows if int(r[f"{p}_calls"] or 0) > 1),
        evidence_refused=sum(1 for r in rows if r[f"{p}_verified"] is False),
        listed=sum(_listed(r, p, rates) for r in rows),
    )


def pushable(row: dict[str, Any], p: str, threshold: int) -> bool:
    """Whether the slots would push this answer: an opportunity at or above the threshold whose evidence was found
    (pushes/decide.py's rule)."""
    return bool(row[f"{p}_opp"]) and int(row[f"{p}_score"]) >= threshold and row[f"{p}_verified"] is not False


def _brief(row: dict[str, Any], p: str) -> dict[str, Any]:
    value = row[f"{p}_json"]
    opps = _opportunities(value)
    return {"score": row[f"{p}_score"], "opportunity": bool(row[f"{p}_opp"]), "type": row[f"{p}_type"],
            "verified": row[f"{p}_verified"] is not False,
            "summary": row[f"{p}_summary"] or "", "direction": _direction(value),
            "targets": [str(t) for o in opps for t in (o.get("targets") or []) if isinstance(t, str)][:8]}


def _differs(row: dict[str, Any]) -> tuple[str, ...]:
    """What two answers of one article differ in: the call (opportunity or not), the type, the direction of the
    first opportunity (when both call one), the score."""
    current, candidate = _direction(row["b_json"]), _direction(row["c_json"])
    return tuple(what for what, differs in (
        ("call", bool(row["b_opp"]) != bool(row["c_opp"])), ("type", row["b_type"] != row["c_type"]),
        ("direction", bool(current and candidate and current != candidate)), ("score", row["b_score"] != row["c_score"]),
    ) if differs)


def _disagreements(rows: list[dict[str, Any]]) -> list[Disagreement]:
    """The articles where the two differ most: a different call first, then a different type or direction, then
    the widest score gap."""
    differing = [(r, _differs(r)) for r in rows]
    ranked = sorted((d for d in differing if d[1]), key=lambda d: (
        "call" not in d[1], not {"type", "direction"} & set(d[1]), -abs(d[0]["b_score"] - d[0]["c_score"]),
        d[0]["content_item_id"]))
    return [Disagreement(r["content_item_id"], r["analysis_id"], r["title"], _brief(r, "b"), _brief(r, "c"),
                         abs(r["b_score"] - r["c_score"]), what) for r, what in ranked[:DISAGREEMENTS]]


def load(conn: Any, evaluation_id: int, now: datetime, *, settings: Any = None) -> Summary | None:
    """The summary of an evaluation as stored ``now``, with the market's verdict on both set-ups' picks from the
    track record's cache; None when there is no such evaluation."""
    evaluation = store.evaluations.get(conn, evaluation_id)
    if evaluation is None:
        return None
    listed = store.track.listings(conn)
    names = instruments.name_index(listed) if listed else None
    ledger = store.evaluations.ledger(conn, evaluation_id)
    rows = store.evaluations.pairs(conn, evaluation_id)
    summary = summarise(evaluation, rows, names, float(ledger["cost"]), settings)
    done = [r for r in rows if r["status"] == store.evaluations.DONE and r["analysis_id"] is not None]
    summary.market = picks.measure(conn, done, names, now)
    paid, first = store.evaluations.volume(conn, evaluation["created_at"], VOLUME_DAYS)
    summary.glance = glance(summary, rows, paid, first, settings)
    summary.current_estimated = bool(settings is not None and settings.price_table().estimated)
    return summary


def current_setup(evaluation: dict[str, Any], rows: list[dict[str, Any]]) -> Setup:
    """The set-up the compared analyses were made with: their model and prompt (the most frequent), thinking and
    effort as configured when the evaluation started if that is the same model, else not known."""
    models = Counter(r["b_model"] for r in rows if r.get("b_model"))
    prompts = Counter(r["b_prompt_version"] for r in rows if r.get("b_prompt_version"))
    configured = evaluation.get("baseline") or {}
    model = models.most_common(1)[0][0] if models else str(configured.get("model") or "?")
    prompt = prompts.most_common(1)[0][0] if prompts else f"analysis-{configured.get('prompt_version') or '?'}"
    known = configured.get("model") == model
    return Setup(model, bool(configured.get("thinking")) if known else None,
                 configured.get("reasoning_effort") if known else None, prompt)


def list_rates(e: dict[str, Any], current_model: str, settings: Any = None) -> tuple[pricing.Rates, pricing.Rates]:
    """The list (off-peak) rates of both set-ups, one table for the verdict whatever hour each was billed at: the
    current model's as the deployment prices it, the candidate's as the evaluation was started with."""
    stored = e.get("prices") or {}
    candidate = (pricing.Rates(float(stored["cache_hit"]), float(stored["cache_miss"]), float(stored["output"]))
                 if "cache_miss" in stored else pricing.table_for(e["model"], e["currency"]).off_peak)
    own = settings is not None and settings.deepseek_model == current_model
    current = pricing.table_for(current_model, e["currency"], settings.deepseek_prices if own else None).off_peak
    return current, candidate


def _listed(row: dict[str, Any], p: str, rates: pricing.Rates) -> float:
    """One side's answer at list rates, to the ledger's six places."""
    prompt, hit, out = (int(row[f"{p}_{k}"] or 0) for k in ("prompt", "hit", "completion"))
    return round((hit * rates.cache_hit + max(prompt - hit, 0) * rates.cache_miss + out * rates.output) / 1e6, 6)


def glance(s: Summary, rows: list[dict[str, Any]], paid: int, first: datetime | None, settings: Any = None) -> Glance:
    e = s.evaluation
    started = e["created_at"]
    days = max(1, min(VOLUME_DAYS, math.ceil((started - first).total_seconds() / 86400))) if first else VOLUME_DAYS
    billed = [r for r in rows if r["status"] == store.evaluations.DONE and r["analysis_id"] is not None
              and r["c_cost"] is not None and r["b_cost"] is not None]
    n, current = len(billed), current_setup(e, rows)
    at_current, at_candidate = list_rates(e, current.model, settings)
    peak = (f"{settings.deepseek_peak_hours} ×{settings.deepseek_peak_multiplier:g}" if settings is not None
            else DEFAULT_PEAK)
    return Glance(
        current=current,
        candidate=Setup(e["model"], e["thinking"], e["reasoning_effort"], f"analysis-{e['prompt_version']}"),
        per_article=sum(_listed(r, "b", at_current) for r in billed) / n if n else None,
        candidate_per_article=sum(_listed(r, "c", at_candidate) for r in billed) / n if n else None,
        per_day=paid / days if paid else None, days=days, verdicts_enough=s.reader_current.conclusive, billed=n,
        billed_current=sum(float(r["b_cost"]) for r in billed), billed_candidate=sum(float(r["c_cost"]) for r in billed),
        peak=peak,
    )


def ended(e: dict[str, Any]) -> str | None:
    """A run that stopped early, as its first line says it: "stopped after 4 of 12: the endpoint failed"."""
    if e["status"] not in ("stopped", "failed"):
        return None
    return f"{e['status']} after {e['answered']} of {e['items']}: {ENDED.get(e['reason'], e['reason'])}"


def glance_lines(g: Glance, s: Summary, money: Any) -> list[str]:
    """The verdict at a glance, as the CLI prints it first."""
    p = s.pushed
    ratio = (f"{g.ratio:.0%} of the current per article" if g.ratio is not None else
             f"— of the current ({g.billed} articles both answered and billed; {MIN_COMPARED} needed to compare)")
    plural = "" if g.days == 1 else "s"
    month = (f"; a month at {g.per_day:.1f} articles a day (over the last {g.days} day{plural}): "
             f"{money(g.month(g.candidate_per_article))} against {money(g.month(g.per_article))}, estimated"
             if g.per_day else "")
    enough = ("enough to judge" if g.verdicts_enough else
              f"too few to judge ({s.reader_current.liked} 👍, {s.reader_current.disliked} 👎; {agreement.MIN_VOTES} of each needed)")
    return [f"  current {g.current.label} · candidate {g.candidate.label}",
            f"  at a glance: the candidate costs {ratio} ({money(g.candidate_per_article)} against "
            f"{money(g.per_article)}){month}; it misses {p.only_current} and adds {p.only_candidate} of "
            f"{p.both + p.only_current} opportunities (as the slots would push them); rank agreement {_num(s.spearman)}; the reader's verdicts: {enough}",
            f"  per article both at their list (off-peak) rates, whatever the hour; billed for those {g.billed} articles: "
            f"candidate {money(g.billed_candidate)}, current {money(g.billed_current)} (the peak window, Beijing "
            f"{g.peak}, bills more)"]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def one_in(chance: float) -> int | None:
    """k when a chance is one in a whole number k (within 2 %), as people say it ("1 in 6"), else None."""
    k = round(1 / chance) if chance > 0 else 0
    return k if k >= 2 and abs(1 / chance - k) < 0.02 * k else None


def auc_text(value: agreement.Auc) -> str:
    if value.value is None:
        return f"— (👍 {value.liked}, 👎 {value.disliked})"
    if value.conclusive:
        return f"{value.value:.2f} [{value.low:.2f}, {value.high:.2f}] (👍 {value.liked}, 👎 {value.disliked})"
    chance = value.chance if value.chance is not None else 1.0
    k = one_in(chance)
    return (f"{value.value:.2f} (👍 {value.liked}, 👎 {value.disliked}; too few verdicts for an interval, at least "
            f"{agreement.MIN_VOTES} of each; a random order does as well {f'1 in {k}' if k else f'{chance:.0%}'})")


def _call(brief: dict[str, Any]) -> str:
    mark = f"✓ {brief['type']}" + (f" {brief['direction']}" if brief["direction"] else "") if brief["opportunity"] else "✗"
    return f"{brief['score']} {mark}" + ("" if brief["verified"] else " (evidence refused: never pushed)")


def lines(s: Summary, money: Any = None) -> list[str]:
    """The summary as the CLI prints it."""
    e, c = s.evaluation, s.confusion
    money = money or (lambda value: format_money(value, e["currency"]))
    source = (e.get("prices") or {}).get("source")
    out = [*([job.over_text(e["over_cap"], money)] if e.get("over_cap") else []), *filter(None, [ended(e)]),
           f"evaluation {e['id']}: {e['model']} ({'thinking ' + (e['reasoning_effort'] or 'on') if e['thinking'] else 'no thinking'}, "
           f"analysis-{e['prompt_version']}) · {e['status']} · {e['note']}",
           *(glance_lines(s.glance, s, money) if s.glance else []),
           f"  compared {s.compared} articles; candidate failed {s.failed}, pending {s.pending}; its money at "
           f"{e['model']}'s {source or 'estimated'} prices ({e['currency']})"
           + ("; the current's at estimated prices" if s.current_estimated else ""),
           f"  opportunity or not: both {c.both}, only current {c.only_current}, only candidate {c.only_candidate}, "
           f"neither {c.neither} (agree {_pct(c.agreement)})",
           f"  score: Spearman {_num(s.spearman)}, mean |difference| {_num(s.mean_abs_diff, 1)}, same band "
           f"{_pct(s.band_agreement)}; same type {_pct(s.type_agreement)}; same direction {_pct(s.direction_agreement)} "
           f"of {s.directions_compared}; targets overlap {_num(s.target_overlap)} over {s.targets_compared}",
           f"  reader's 👍/👎 AUC: current {auc_text(s.reader_current)}; candidate {auc_text(s.reader_candidate)}"]
    for label, side in (("current", s.current), ("candidate", s.candidate)):
        if side is None:
            continue
        out.append(f"  {label}: {money(side.listed)} at list rates (billed {money(side.cost)}), {side.prompt_tokens} prompt tokens ({side.cache_hit_tokens} cache "
                   f"hits), {side.completion_tokens} output, {_num(side.latency_ms, 0)} ms per article, "
                   f"{side.repaired} repaired, {side.evidence_refused} evidence refused, "
                   f"{side.opportunities} opportunities, {money(side.cost_per_opportunity)} per opportunity")
    if s.market is not None:
        m = s.market
        for label, tally in (("picked by both, current's call", m.both_current),
                             ("picked by both, candidate's call", m.both_candidate),
                             ("picked by current only", m.only_current), ("picked by candidate only", m.only_candidate)):
            out.append(f"  market T+{m.horizon}, {label}: {tally.picks} pick{'' if tally.picks == 1 else 's'}, "
                       f"{tally.measured} measured, {tally.waiting} waiting, "
                       f"{tally.not_measurable} not measurable; hits {tally.hits}/{tally.directional}, "
                       f"mean signed excess {f'{tally.mean_signed_excess:+.2%}' if tally.mean_signed_excess is not None else '—'}")
    for d in s.disagreements:
        out.append(f"  ≠ {d.title[:40]}: current {_call(d.current)} / candidate {_call(d.candidate)} "
                   f"({', '.join(d.differs)}; gap {d.gap})")
    return out
