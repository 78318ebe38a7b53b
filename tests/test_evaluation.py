"""The shadow evaluation: a candidate model answers the reader's stored articles, its answers stored apart, its
spend in the ledger under a cap, compared with the current set-up, the reader's verdicts, cost and time.

The end-to-end cases run the demo's articles through a real 22:00 slot (the stand-in DeepSeek answers v4-pro
with the demo's recorded answers), then evaluate deepseek-flash (its own recorded answers,
include/radar_demo/data/answers_flash.json). The expected figures are worked out by hand from the two files.

Rooms: agreement.py, evaluation.py, evaluation_report.py, evaluation/commands.py, store/evaluations.py.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest

from include.radar import store
from include.radar.core import db
from include.radar.core.clock import FixedClock
from include.radar.core.settings import load_settings
from include.radar.core.slots import SHANGHAI
from include.radar.evaluation import agreement, shadow, summary
from include.radar_demo import run as demo_run
from tests.conftest import connect
from tests.evaluation_day import DAY, FLASH, FLASH_CALL, LATER, PRO_CALL, calls_of, demo_day, ledger, rows_in, start
from tests.reading import REORDERING, reads_in_order
from tests.slotrun import run_slot, shanghai

# ------------------------------------------------------------------------------------------ pure figures


def test_ranks_share_the_mean_of_tied_places() -> None:
    assert agreement.ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert agreement.ranks([3, 1, 2]) == [3, 1, 2]


def test_spearman_has_its_hand_computed_values() -> None:
    # d = -1, 1, -1, 1, 0: rho = 1 - 6 * 4 / (5 * 24) = 0.8
    assert agreement.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
    # ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5) = 0.948683
    assert agreement.spearman([10, 20, 20, 30], [1, 2, 3, 4]) == pytest.approx(0.948683, abs=1e-6)
    assert agreement.spearman([5, 10], [1, 1]) is None and agreement.spearman([1], [1]) is None


def test_auc_counts_pairs_and_has_hanley_mcneil_s_interval_from_ten_of_each() -> None:
    # liked: five 80s and five 60s; disliked: five 70s and five 40s; 80 beats all ten, 60 the five 40s: 75 of 100
    result = agreement.auc([80] * 5 + [60] * 5, [70] * 5 + [40] * 5)
    assert result.value == 0.75 and result.conclusive and result.chance is None
    # Q1 = 0.75 / 1.25 = 0.6, Q2 = 2 x 0.5625 / 1.75 = 0.642857; var = (0.1875 + 9 (0.0375) + 9 (0.080357)) / 100
    # = 0.01248214, se = 0.111723
    assert result.low == pytest.approx(0.75 - 1.959964 * 0.111723, abs=1e-5)
    assert result.high == pytest.approx(0.75 + 1.959964 * 0.111723, abs=1e-5)
    assert agreement.auc([50], [50]).value == 0.5  # a tie counts a half
    assert agreement.auc([], [1, 2]).value is None


def test_a_small_sample_s_auc_has_no_interval_but_the_exact_chance_of_doing_as_well_at_random() -> None:
    # 2 liked against 2 disliked, split perfectly: 1 of the C(4, 2) = 6 orders does that
    perfect = agreement.auc([90, 80], [20, 10])
    assert (perfect.value, perfect.low, perfect.high) == (1.0, None, None)
    assert perfect.chance == pytest.approx(1 / 6) and not perfect.conclusive
    # liked 80, 70, 60 against disliked 65, 40: 5 of 6 pairs; of the C(5, 2) = 10 orders, U >= 5 in 2 (U = 5, 6)
    assert agreement.auc([80, 70, 60], [65, 40]).chance == pytest.approx(2 / 10)
    # the counts of U for 3 against 3 (20 orders); a tie counts a half and U is rounded up: 80 beats three, 70 two
    # and ties one, 50 beats one: U = 6.5, and U >= 7 in 2 + 1 + 1 of the 20 orders
    assert agreement.u_counts(3, 3) == [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]
    tied = agreement.auc([80, 70, 50], [70, 60, 40])
    assert tied.value == pytest.approx(6.5 / 9) and tied.chance == pytest.approx(4 / 20)
    few = agreement.auc([90] * 10, [10] * 9)
    assert not few.conclusive and few.low is None and few.chance == pytest.approx(1 / 92378)  # C(19, 9)


def test_confusion_overlap_and_difference() -> None:
    c = agreement.confusion([(True, True), (True, False), (False, True), (False, False), (False, False)])
    assert (c.both, c.only_current, c.only_candidate, c.neither, c.agreement) == (1, 1, 1, 2, 0.6)
    assert agreement.jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert agreement.jaccard(set(), set()) is None
    assert agreement.mean_abs_diff([1, 5], [4, 5]) == 1.5


def test_the_estimate_is_every_token_a_cache_miss_at_peak_rates() -> None:
    prices, source = shadow.candidate_prices(load_settings(use_airflow=False), FLASH)
    rows = [{"prompt_tokens": 1200, "completion_tokens": 400, "clean_text": "x"},
            {"prompt_tokens": 0, "completion_tokens": 0, "clean_text": "字" * 1000}]
    # peak = off-peak x 2: (1200 * 0.30 + 400 * 1.20) + ((1000 + 3000) * 0.30 + 2000 * 1.20), per million
    assert shadow.estimate(rows, prices) == pytest.approx((360 + 480 + 1200 + 2400) / 1e6)
    assert source == "published"


@pytest.mark.parametrize(("candidate", "sample"), [
    (shadow.Candidate(model="deepseek flash"), shadow.Sample()),
    (shadow.Candidate(model="m", prompt_version="v99"), shadow.Sample()),
    (shadow.Candidate(model="m", prompt_version="../x"), shadow.Sample()),
    (shadow.Candidate(model="m", reasoning_effort="extreme"), shadow.Sample()),
    (shadow.Candidate(model="m"), shadow.Sample(size=shadow.MAX_SAMPLE + 1)),
    (shadow.Candidate(model="m"), shadow.Sample(days=0)),
    (shadow.Candidate(model="m"), shadow.Sample(only_with="votes")),
])
def test_a_bad_candidate_or_an_unbounded_sample_is_refused_before_anything(candidate, sample) -> None:
    with pytest.raises(shadow.EvaluationError):
        candidate.check()
        sample.check()


# ------------------------------------------------------------------------------------------- end to end


def test_flash_against_v4_pro_on_the_demo_day_gives_the_hand_computed_figures(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    pro_calls = calls_of(fakes, "deepseek-v4-pro")
    plan = start()
    # 12 analyses: 喜报 is excluded by the reader's rule, 重磅调研 repeats 设备订单's text (reused, not sampled),
    # 黄金 is older than the slot's window; 1200 + 400 tokens each at flash's peak (= off-peak) rates
    assert plan.articles == 12 and plan.refused is None
    assert plan.estimate == pytest.approx(12 * (1200 * 0.15 + 400 * 0.60) / 1e6)
    run = shadow.run(connect, load_settings(), plan.evaluation_id)
    assert run.stopped is None and run.counts == {"answered": 12}
    # 11 answers in one call; 手机链's 62 quotes nothing, so the ladder asks again on every rung (4 calls)
    assert calls_of(fakes, "deepseek-flash") == 15 and calls_of(fakes, "deepseek-v4-pro") == pro_calls
    with connect() as conn:
        s = summary.load(conn, plan.evaluation_id, LATER)
    assert s is not None and (s.compared, s.failed, s.pending) == (12, 0, 0)
    c = s.confusion  # current: 设备 铜 集采 机器人 集运; flash drops 铜, adds 手机链
    assert (c.both, c.only_current, c.only_candidate, c.neither) == (4, 1, 1, 6)
    # |differences| (夜读 汽车 光伏 集运 机器人 早参 集采 储能 央行 铜 手机链 设备): 5 0 5 6 0 2 3 0 3 16 14 7 = 61
    assert s.mean_abs_diff == pytest.approx(61 / 12)
    # other bands: 集运 70 → 64, 铜 74 → 58, 手机链 48 → 62, 设备 82 → 75; other types: 铜, 手机链
    assert s.band_agreement == pytest.approx(8 / 12) and s.type_agreement == pytest.approx(10 / 12)
    assert (s.direction_agreement, s.directions_compared) == (pytest.approx(3 / 4), 4)  # 机器人: bullish → watch
    # liked (82, 63, 71) over disliked (70, 52, 74): 6 of 9 pairs; flash's (75, 66, 71) over (64, 52, 58): all 9
    assert s.reader_current.value == pytest.approx(6 / 9) and s.reader_candidate.value == 1.0
    # three of each: no interval; a random order does as well (U >= 6 of 9) in 3 + 2 + 1 + 1 of the C(6, 3) = 20
    # orders, as well as flash (U = 9) in 1
    assert (s.reader_current.low, s.reader_current.chance) == (None, pytest.approx(7 / 20))
    assert s.reader_candidate.chance == pytest.approx(1 / 20)
    assert not s.reader_current.conclusive and (s.reader_current.liked, s.reader_current.disliked) == (3, 3)
    assert s.candidate is not None and s.current is not None
    assert (s.candidate.prompt_tokens, s.candidate.cache_hit_tokens, s.candidate.completion_tokens) == (
        15 * 1200, 15 * 256, 15 * 400)
    # the ledger keeps each ladder's cost to 6 places: 11 x 0.000382 + 0.001529 (4 calls) = 0.005731
    flash = 11 * round(FLASH_CALL, 6) + round(4 * FLASH_CALL, 6)
    assert s.candidate.cost == pytest.approx(0.005731) == flash
    assert s.current.cost == pytest.approx(12 * round(PRO_CALL, 6))  # 12 x 0.001421
    assert s.candidate.cost_per_opportunity == pytest.approx(0.005731 / 5)
    assert s.current.cost_per_opportunity == pytest.approx(12 * 0.001421 / 5)
    assert (s.candidate.repaired, s.candidate.evidence_refused, s.current.repaired) == (1, 1, 0)
    first = s.disagreements[0]  # a different call with the widest gap first: 铜 (74 → 58)
    assert first.title.startswith("铜") and (first.current["score"], first.candidate["score"]) == (74, 58)
    assert first.differs == ("call", "type", "score")
    assert s.disagreements[1].title.startswith("手机链")
    robot = s.disagreements[2]  # then a changed direction, the same score and call: 机器人 (71, bullish → watch)
    assert robot.title.startswith("人形机器人") and robot.differs == ("direction",) and robot.gap == 0
    assert (robot.current["direction"], robot.candidate["direction"]) == ("bullish", "watch")
    assert s.spearman == pytest.approx(_spearman_by_hand(s.points))


def _spearman_by_hand(points: list[tuple[int, int]]) -> float:
    """Spearman's rho by its textbook definition (no ties within one side: 1 - 6 sum d^2 / (n (n^2 - 1)))
    when there are none, else the Pearson correlation of mid-ranks written out afresh."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]

    def mid(values: list[int]) -> list[float]:
        return [sum(1 for w in values if w < v) + (sum(1 for w in values if w == v) + 1) / 2 for v in values]

    rx, ry = mid(xs), mid(ys)
    n = len(points)
    mx, my = sum(rx) / n, sum(ry) / n
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    return num / (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5


def test_an_estimate_over_the_cap_is_refused_up_front_and_pays_nothing(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    plan = start(cap=0.005)  # the estimate is 12 x 0.00042 = 0.00504
    assert plan.refused is not None and "over the cap" in plan.refused
    run = shadow.run(connect, load_settings(), plan.evaluation_id)
    assert run.stopped == plan.refused and calls_of(fakes, "deepseek-flash") == 0
    assert ledger(plan.evaluation_id) == (0, 0.0)


def test_a_lost_worker_s_claim_is_taken_over_once_its_lease_ran_out_and_a_live_one_is_left_alone(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    plan = start(size=3)  # 设备, 手机链, 铜 (the newest first)
    with connect() as conn:
        items = [r["item_id"] for r in store.evaluations.open_items(conn, plan.evaluation_id, 3)]
        dead = store.evaluations.claim(conn, plan.evaluation_id, items[0], claimer="dead", max_attempts=3,
                                lease=timedelta(seconds=-1))
        live = store.evaluations.claim(conn, plan.evaluation_id, items[1], claimer="alive", max_attempts=3)
    assert dead.state == live.state == "claimed"
    run = shadow.run(connect, load_settings(), plan.evaluation_id, claimer="resumer")
    assert run.counts == {"answered": 2} and run.stopped is not None and "held by another run" in run.stopped
    with connect() as conn:
        attempts = conn.execute("SELECT content_item_id, claimed_by, attempt, outcome FROM evaluation_attempt "
                                "ORDER BY id").fetchall()
    outcomes = [(a["content_item_id"], a["claimed_by"], a["attempt"], a["outcome"]) for a in attempts]
    assert (items[0], "dead", 1, "expired") in outcomes and (items[0], "resumer", 2, "analysed") in outcomes
    assert (items[1], "alive", 1, "running") in outcomes and not [o for o in outcomes if o[:2] == (items[1], "resumer")]


def _fingerprint() -> dict[str, Any]:
    tables = ("analysis_result", "opportunity", "notification_log", "push_decision", "track_pick", "track_outcome",
              "feedback", "daily_report", "content_item")
    with connect() as conn:
        return {t: json.dumps(conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall(), default=str, sort_keys=True)
                for t in tables}


def test_nothing_of_an_evaluation_reaches_pushes_the_analyses_the_record_or_the_rank(fakes, monkeypatch) -> None:
    ids = demo_day(fakes, monkeypatch)
    before = _fingerprint()
    phone = next(i for t, i in ids.items() if t.startswith("手机链"))
    with connect() as conn:
        phone_cost = store.operations.item_spend(conn, conn.execute(
            "SELECT content_item_id FROM analysis_result WHERE id = %s", (phone,)).fetchone()["content_item_id"])
    plan = start()
    shadow.run(connect, load_settings(), plan.evaluation_id)
    assert _fingerprint() == before  # no analysis, push, pick, report or article row changed
    with connect() as conn:
        item = conn.execute("SELECT content_item_id FROM analysis_result WHERE id = %s", (phone,)).fetchone()
        assert store.operations.item_spend(conn, item["content_item_id"]) == phone_cost  # the article's own cost only
    sent = len(fakes.sink.received)
    morning = shanghai(2026, 2, 5, 7)
    fakes.at(morning)
    run_slot(morning)  # flash's 62 for 手机链 is no opportunity of the radar's: nothing new to push
    assert len(fakes.sink.received) == sent
    from tests.slotrun import read_page

    page = read_page(f"/analysis/{phone}", LATER)
    assert "（flash）" not in page and "手机链" in page
    assert "（flash）" not in read_page("/record", LATER) and "（flash）" not in read_page(f"/daily/{DAY}", LATER)


def test_the_cli_starts_an_evaluation_and_prints_its_summary(fakes, monkeypatch, capsys) -> None:
    demo_day(fakes, monkeypatch)
    from include.radar import cli

    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "1", "--days", "366", "--size", "50"]) == 0
    out = capsys.readouterr().out
    assert "current deepseek-v4-pro (thinking high, analysis-v3) · candidate deepseek-flash (thinking high, analysis-v3)" in out
    assert ("at a glance: the candidate costs 34% of the current per article ($0.0005 against $0.0014); a month at "
            "12.0 articles a day (over the last 1 day): $0.1719 against $0.5116, estimated; it misses 1 and adds 0 of 5 "
            "opportunities (as the slots would push them); rank agreement 0.91; the reader's verdicts: too few to judge (3 👍, 3 👎; 10 of each needed)") in out
    assert re.search(r"evaluation \d+: 12 articles", out) and "both 4, only current 1, only candidate 1, neither 6" in out
    assert "too few verdicts for an interval, at least 10 of each; a random order does as well 35%" in out
    assert "≠ 人形机器人" in out and "current 71 ✓ sector bullish / candidate 71 ✓ sector watch (direction; gap 0)" in out
    assert cli.main(["evaluation"]) == 0 and "12/12 answered" in capsys.readouterr().out
    assert cli.main(["evaluate", "--model", "deepseek-flash", "--cap", "0.001", "--days", "366"]) == 1
    assert "refused" in capsys.readouterr().out


def _page_client(now: Any, *, airflow_user: bool) -> Any:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    app = create_app(lambda: load_settings(use_airflow=False), db.database_url(), clock=FixedClock(now))
    if airflow_user:
        app.dependency_overrides[get_user] = lambda: object()
        app.dependency_overrides[may_read_radar] = lambda user: True
    return TestClient(app)


def test_the_page_lists_evaluations_shows_one_escaped_and_answers_head(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    plan = start()
    shadow.run(connect, load_settings(), plan.evaluation_id)
    with connect() as conn:  # an answer that tries to be markup
        conn.execute("UPDATE evaluation_item SET summary = '<script>alert(1)</script>' WHERE score = 58")
    client = _page_client(LATER, airflow_user=True)
    listing = client.get("/evaluation")
    assert listing.status_code == 200 and f"/evaluation/{plan.evaluation_id}" in listing.text
    assert "deepseek-flash · 思考·高 · analysis-v3" in listing.text and "12/12 篇已回答" in listing.text
    page = client.get(f"/evaluation/{plan.evaluation_id}")
    assert page.status_code == 200 and "<svg" in page.text and page.text.count("fill-opacity=\".7\"") == 12
    assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "0.67（👍 3 · 👎 3）：样本太少，不给区间（每类至少 10 条）；随机打分也有 35% 的机会分得一样好" in page.text
    assert "1.00（👍 3 · 👎 3）：样本太少，不给区间（每类至少 10 条）；随机打分也有 1/20 的机会分得一样好" in page.text
    head = client.head(f"/evaluation/{plan.evaluation_id}")
    assert head.status_code == 200 and head.content == b""
    for bad in ("0", "x", "9" * 30, str(plan.evaluation_id + 100), "%00"):
        assert client.get(f"/evaluation/{bad}").status_code == 404


def test_a_control_in_an_answer_leaves_the_evaluation_page_reading_in_order(fakes, monkeypatch) -> None:
    """An unclosed U+202E in a candidate's target made 600519.SH read HS.915006 in the disagreements (and the
    rest of that line reversed); each control, in a target, a code and a summary, is gone and the line in order."""
    demo_day(fakes, monkeypatch)
    plan = start()
    shadow.run(connect, load_settings(), plan.evaluation_id)
    client = _page_client(LATER, airflow_user=True)
    for control in REORDERING:
        with connect() as conn:
            conn.execute("UPDATE evaluation_item SET summary = %s, result_json = jsonb_set(result_json, "
                         "'{opportunities,0,targets}', %s::jsonb) WHERE score = 71",
                         (f"订单{control}在 08:30 公告", json.dumps([f"{control}中微公司 688012", f"贵州茅台（600519{control}.SH）"])))
        page = client.get(f"/evaluation/{plan.evaluation_id}").text
        assert reads_in_order(page), f"U+{ord(control):04X}"
        assert "候选 71 分 · 有机会 · 行业 · 观察 · 中微公司 688012、贵州茅台（600519.SH）" in page and "订单在 08:30 公告" in page


def test_the_page_opens_on_the_verdict_naming_both_set_ups_in_chinese(fakes, monkeypatch) -> None:
    demo_day(fakes, monkeypatch)
    plan = start()
    shadow.run(connect, load_settings(), plan.evaluation_id)
    page = _page_client(LATER, airflow_user=True).get(f"/evaluation/{plan.evaluation_id}").text
    verdict = page.split('<section class="card verdict">', 1)[1].split("</section>", 1)[0]
    assert page.index('<section class="card verdict">') < page.index("一致程度")  # the first card
    assert f"<h1>评估 #{plan.evaluation_id}：deepseek-flash 对比 deepseek-v4-pro</h1>" in verdict
    assert ("<tr><th>模型</th><td>deepseek-v4-pro</td><td>deepseek-flash</td></tr><tr><th>思考</th><td>思考·高</td>"
            "<td>思考·高</td></tr><tr><th>提示词</th><td>analysis-v3</td><td>analysis-v3</td></tr>") in verdict
    # per article: flash's ledger 0.005731 / 12 = 0.000478 against v4-pro's 0.001421: 34%; 12 paid analyses in the
    # one day before it: 12 a day, 360 a month
    # 手机链, the opportunity flash adds, quotes nothing its article says: the slots would never push it
    assert ("候选每篇便宜 66%，机会判断一致 83%（按推送的规则漏掉 1 个、多出 0 个），评分排序 Spearman 0.91；"
            "你的反馈还不够判断哪个更准。") in verdict
    assert "<dt>费用</dt><dd>候选为当前的 34%（每篇 $0.0005 对 $0.0014）</dd>" in verdict
    assert "<dt>一个月</dt><dd>按近 1 天每天约 12.0 篇：候选约 $0.1719，当前约 $0.5116（估算）</dd>" in verdict
    assert "<dt>你的反馈</dt><dd>不足以判断（👍 3 · 👎 3，每类至少 10 条）</dd>" in verdict
    assert "候选按 deepseek-flash 的公开价格（USD）计" in verdict and "完成 · 12/12 篇已回答 · 已花 $0.0057 / 上限 $1.00" in verdict
    with connect() as conn:
        created = store.evaluations.get(conn, plan.evaluation_id)["created_at"]
    assert f"{created.astimezone(SHANGHAI):%Y-%m-%d %H:%M} · 完成" in verdict  # Beijing time, as every page
    # the chart's axes are named; the disagreements' enums are in Chinese, the robot's changed direction among them
    assert ">当前（deepseek-v4-pro）的评分</text>" in page and ">候选（deepseek-flash）的评分</text>" in page
    assert "不同：方向" in page and "当前 71 分 · 有机会 · 行业 · 看多" in page and "候选 71 分 · 有机会 · 行业 · 观察" in page
    assert "候选 58 分 · 无机会<" in page
    body = page.split("<main", 1)[1]
    assert not [word for word in ("bullish", "bearish", "watch", "sector", "commodity", "done", "stopped")
                if re.search(rf"[>\s·]{word}[<\s·]", body)]


def test_a_pushed_link_or_its_session_never_opens_the_evaluation_page(fakes, monkeypatch) -> None:
    from include.radar.core import signing
    from include.radar.web.auth import READ_COOKIE, read_session_value

    monkeypatch.setenv("AIRFLOW_VAR_RADAR_LINK_SESSION_PAGES", "overview,daily,analysis,record")
    secret = "test-link-secret-0123456789abcdef01"
    client = _page_client(LATER, airflow_user=False)
    for path in ("/evaluation", "/evaluation/1"):
        signed = client.get(path, params=signing.sign(path, secret, LATER, 1))
        assert signed.status_code == 401 and "登录" in signed.text
    cookie, _ = read_session_value(secret, int(LATER.timestamp()) + 86400, LATER.timestamp(), 30, 1, "ab" * 32)
    client.cookies.set(READ_COOKIE, cookie)
    assert client.get("/evaluation").status_code == 401
    assert client.get(f"/daily/{DAY}").status_code == 200  # the same session opens a report page


def test_both_set_ups_picks_are_measured_by_the_record_s_rules_from_the_slot_s_time(fakes, monkeypatch) -> None:
    """The demo day's record six weeks on (recorded prices): the 22:00 slot ran at 22:01, after the close, so each
    call is measured from 2月5日's open to the close of the 5th trading day after it (2月12日), against CSI 300."""
    demo_day(fakes, monkeypatch)
    with connect() as conn:  # the slot ran on time (the replay's wall clock is not the slot's time)
        conn.execute("UPDATE slot_run SET started_at = scheduled_at + interval '1 minute'")
    demo_run.date_pushes_at_slot(db.database_url(), DAY, "22:00", shanghai(2026, 2, 4, 22, 1))
    demo_run.record_later(DAY, db.database_url())
    plan = start()
    shadow.run(connect, load_settings(), plan.evaluation_id)
    with connect() as conn:
        s = summary.load(conn, plan.evaluation_id, now=shanghai(2026, 3, 18, 22, 30))
    assert s is not None and s.market is not None and s.market.horizon == 5
    # picks both made: 设备 (SW:801081) and 集运 (SW:801170) measured; 机器人 names no index, 集采's 医药 index was
    # never fetched by the record (not among its picks): not measurable
    semis = 4013.64 / 3733.46 - 1  # 0.075046
    shipping = 4596.76 / 4325.78 - 1  # 0.062643
    csi = 3994.13 / 3929.32 - 1  # 0.016494
    for tally in (s.market.both_current, s.market.both_candidate):
        assert (tally.picks, tally.measured, tally.not_measurable, tally.hits, tally.directional) == (4, 2, 2, 2, 2)
        assert sorted(tally.returns) == [pytest.approx(shipping), pytest.approx(semis)]
        assert tally.mean_signed_excess == pytest.approx(((semis - csi) + (shipping - csi)) / 2)  # 0.052350
    # only the current set-up: 铜 (a commodity: nothing tradable); only flash: 手机链's 电子 index, never fetched
    assert (s.market.only_current.picks, s.market.only_current.measured) == (1, 0)
    assert (s.market.only_candidate.picks, s.market.only_candidate.measured) == (1, 0)
    six_weeks_on = _page_client(shanghai(2026, 3, 18, 22, 30), airflow_user=True)
    page = six_weeks_on.get(f"/evaluation/{plan.evaluation_id}").text
    assert "与市场对照（T+5" in page and "<td>2 / 0 / 2</td><td>2/2</td><td>+5.24%</td>" in page
    # the morning after, T+5 is not published yet: the two measurable picks wait, nothing read ahead of its time
    with connect() as conn:
        early_summary = summary.load(conn, plan.evaluation_id, now=LATER)
    assert early_summary is not None and early_summary.market is not None
    both = early_summary.market.both_current
    assert (both.picks, both.measured, both.waiting, both.not_measurable) == (4, 0, 2, 2)
    early = _page_client(LATER, airflow_user=True).get(f"/evaluation/{plan.evaluation_id}").text
    assert "<td>0 / 2 / 2</td><td>—</td>" in early


def test_the_evaluation_dag_is_a_manual_dag_of_its_own_whose_step_runs_and_resumes(fakes, monkeypatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from include.radar import steps
    from include.radar.operations.connections import ConfigurationError
    from include.radar.steps.runtime import Runtime
    from tests.conftest import REPO

    bag = DagBag(dag_folder=str(REPO / "dags" / "radar_evaluation.py"))
    assert bag.import_errors == {}
    dag = bag.dags["opportunity_radar_evaluation"]
    assert type(dag.timetable).__name__ == "NullTimetable" and [t.task_id for t in dag.tasks] == ["evaluate"]
    assert dag.tasks[0].pool == "radar_llm"
    assert {"model", "cap", "resume", "only", "size", "prices", "dry_run"} <= set(dag.params)
    demo_day(fakes, monkeypatch)
    step = steps.load("evaluate")
    params = {"model": "deepseek-flash", "thinking": True, "reasoning_effort": "high", "prompt_version": "v3",
              "connection": None, "days": 366, "size": 50, "only": "feedback", "cap": 1.0, "resume": None}
    dry = step(Runtime.load(), {**params, "dry_run": True}, run_id="manual__0")  # the form's 只估算
    assert dry["evaluation_id"] is None and "6 articles; estimated $0.0025 for one call an article" in dry["summary"][1]
    assert rows_in("evaluation") == {"evaluation": 0} and calls_of(fakes, "deepseek-flash") == 0
    out = step(Runtime.load(), params, attempt=("evaluate", -1, 1), run_id="manual__1")
    # only the six articles with a verdict; their six answers, one call each
    assert out["counts"] == {"answered": 6} and calls_of(fakes, "deepseek-flash") == 6
    again = step(Runtime.load(), {**params, "resume": out["evaluation_id"]}, attempt=("evaluate", -1, 2),
                 run_id="manual__1")
    assert again["counts"] == {} and calls_of(fakes, "deepseek-flash") == 6  # a retry pays for nothing again
    with pytest.raises(ConfigurationError, match="refused"):
        step(Runtime.load(), {**params, "cap": 0.0001}, run_id="manual__2")
    with pytest.raises(ConfigurationError, match="--prompt 'v9'"):
        step(Runtime.load(), {**params, "prompt_version": "v9"}, run_id="manual__3")
    fakes.deepseek.responder = lambda body: (503, {"error": {"message": "upstream down"}})
    with pytest.raises(ConfigurationError, match="failed: 3 articles in a row failed"):  # a failed run fails its task
        step(Runtime.load(), {**params, "only": "all"}, run_id="manual__4")


@pytest.mark.browser
def test_the_page_fits_a_phone_of_420_px_and_opens_on_the_verdict(fakes, monkeypatch, db_url: str) -> None:
    from include.radar.web.app import create_app
    from tests.browser import SCREENSHOTS, chromium, screenshot, serve
    from tests.pages import FakeUser, airflow_get_user, allow_reading

    demo_day(fakes, monkeypatch)
    plan = start()
    shadow.run(connect, load_settings(), plan.evaluation_id)
    app = create_app(lambda: load_settings(use_airflow=False), db_url, clock=FixedClock(LATER))
    app.dependency_overrides[airflow_get_user()] = lambda: FakeUser()
    allow_reading(app)
    with serve(app) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 420, "height": 1000}, is_mobile=True)
        assert page.goto(base + f"/evaluation/{plan.evaluation_id}").status == 200
        assert page.evaluate("document.documentElement.scrollWidth") <= 420  # the cost and market tables included
        for table in page.locator("table").all():
            assert table.evaluate("t => t.getBoundingClientRect().right") <= 420
        verdict = page.locator("section.verdict")
        assert verdict.is_visible() and verdict.evaluate("e => e.getBoundingClientRect().top") < 200
        assert page.locator("p.reading").evaluate("e => e.getBoundingClientRect().bottom") < 1000  # on the first screen
        screenshot(page, "shadow.png")
        page.screenshot(path=str(SCREENSHOTS / "evaluation-phone.png"))  # the first screen, for docs/evaluation.md
