"""Evidence quotes are checked against the article, and a score that contradicts the
model's own flag is repaired or resolved conservatively; hostile answers get the behaviour the reader needs.

Rooms: evidence.py, rubric.py, schemas.py, analyst.py (the re-ask), steps/summarise.py (what may be pushed), the
analysis page (web/trust.py).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from include.radar.analysis import evidence
from include.radar.analysis.schemas import ArticleAnalysis
from tests.conftest import connect
from tests.slotrun import answer, article, run_slot, shanghai

SLOT = shanghai(2026, 1, 8, 14)
BODY = "<p>公司公告：11 月储能集采中标规模同比增长 120%，订单排产已至明年二季度。</p><p>风险：碳酸锂价格反弹。</p>"


def _setup(fakes, *bodies: str) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(n, SLOT - timedelta(hours=n), body=b, title=f"文章{n}")
                            for n, b in enumerate(bodies, start=1)]
    fakes.at(SLOT)


def _analyses() -> list[dict]:
    with connect() as conn:
        return conn.execute("SELECT a.*, c.external_id FROM analysis_result a JOIN content_item c "
                            "ON c.id = a.content_item_id ORDER BY a.id").fetchall()


def _user(body: dict) -> str:
    return body["messages"][1]["content"]


def _article(text: str) -> evidence.Article:
    return evidence.Article(text)


# ------------------------------------------------------------------------------------------------ finding


@pytest.mark.parametrize("quote", [
    "11 月储能集采中标规模同比增长 120%",
    "11月储能集采中标规模同比增长120％",  # full-width percent, no spaces
    "“订单排产已至明年二季度”",  # quoted
    "储能集采中标规模……订单排产已至明年二季度",  # an ellipsis between parts in order
    "ORDER 排产",  # Latin letters compared without case (not in the text: must still be a miss)
])
def test_quotes_are_found_whatever_their_spacing_width_and_quote_marks(quote):
    source = _article("公司公告：11 月储能集采中标规模同比增长 120%，订单排产已至明年二季度。风险：碳酸锂价格反弹。")
    found = source.find(quote)
    if quote.startswith("ORDER"):
        assert found is None
    else:
        assert found is not None
        start, end = found
        assert "储能" in source.text[start:end] or "排产" in source.text[start:end]


@pytest.mark.parametrize(("quote", "why"), [
    ("中标规模同比增长 150%", "a changed number"),
    ("订单排产已至明年三季度", "a changed word"),
    ("二季度。风险：碳酸锂价格反弹订单", "parts out of order"),
    ("同比", "too short to prove anything"),
    ("光伏龙头签下百亿订单", "a quote from another article"),
    ("公司……中标", "ellipsis parts too short to prove anything"),
])
def test_quotes_that_are_not_in_the_article_are_not_verified(quote, why):
    source = _article("公司公告：11 月储能集采中标规模同比增长 120%，订单排产已至明年二季度。风险：碳酸锂价格反弹。")
    assert source.find(quote) is None, why


def test_ellipsis_parts_must_come_from_one_passage():
    filler = "行业背景介绍。" * 20
    source = _article(f"公司公告：储能订单同比增长。{filler}风险提示：碳酸锂价格反弹。")
    assert source.find("储能订单同比增长……碳酸锂价格反弹") is None
    assert _article("公司公告：储能订单同比增长，排产至明年，风险提示：碳酸锂价格反弹。").find(
        "储能订单同比增长……碳酸锂价格反弹") is not None


def test_a_quote_never_matches_inside_a_longer_number():
    source = _article("公司去年净利润下降50%。今年收入增长30%，毛利率提升到 12.5%。")
    assert source.find("今年收入增长3") is None
    assert source.find("毛利率提升到12") is None
    assert source.find("今年收入增长30%") is not None and source.find("毛利率提升到 12.5%") is not None


def test_a_found_quote_keeps_its_place_and_sentence():
    text = "第一句话。公司公告：中标规模同比增长 120%，排产饱满。最后一句。"
    value = ArticleAnalysis.model_validate(json.loads(answer(75, evidence=("中标规模同比增长120%", "编造的一句话"))))
    verdict = evidence.check(value, _article(text), 60)
    found, invented = verdict.quotes
    assert found.verified and text[found.start:found.end] == "中标规模同比增长 120%"
    assert found.context == "公司公告：中标规模同比增长 120%，排产饱满。"
    assert not invented.verified and invented.start is None
    assert (verdict.verified, verdict.unverified) == (1, 1)


# ------------------------------------------------------------------------------------ through the slot


def test_an_answer_whose_quote_verifies_costs_one_call(fakes):
    _setup(fakes, BODY)
    fakes.deepseek.responder = lambda b: answer(75, evidence=("中标规模同比增长 120%",))
    run_slot(SLOT)
    assert len(fakes.deepseek.requests) == 1
    [row] = _analyses()
    checks = row["result_json"]["checks"]
    assert row["evidence_verified"] and checks["verified"] == 1 and checks["quotes"][0]["context"]
    assert len(fakes.sink.received) == 1  # pushed


def test_an_invented_quote_is_asked_again_and_a_verbatim_one_is_kept(fakes):
    _setup(fakes, BODY)
    fakes.deepseek.script = [answer(75, evidence=("公司获得千亿大单",))]
    fakes.deepseek.responder = lambda b: answer(75, evidence=("订单排产已至明年二季度",))
    run_slot(SLOT)
    users = fakes.deepseek.user_messages()
    assert len(users) == 2 and users[1].endswith(evidence.EVIDENCE_AGAIN)
    [row] = _analyses()
    assert row["evidence_verified"] and row["llm_calls"] == 2
    assert len(fakes.sink.received) == 1


@pytest.mark.parametrize("quote", ["公司获得千亿大单", "中标规模同比增长 150%", "光伏龙头签下百亿订单"],
                         ids=["invented", "changed number", "another article's"])
def test_evidence_that_never_verifies_is_stored_marked_and_never_pushed(fakes, monkeypatch, quote):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "1")
    _setup(fakes, BODY, "<p>另一篇：某光伏龙头签下百亿订单，组件价格企稳。</p>")
    fakes.deepseek.responder = lambda b: answer(90, evidence=(quote,)) if "储能集采" in _user(b) else answer(30)
    result = run_slot(SLOT)
    stored = {r["external_id"]: r for r in _analyses()}
    hostile = stored["1-1"]
    assert hostile["score"] == 90 and hostile["evidence_verified"] is False
    assert hostile["result_json"]["checks"]["unverified"] == 1
    assert result["summary"]["unverified"] == 1 and result["summary"]["above_threshold"] == 0
    assert result["branch"] == "skip_push" and fakes.sink.received == []
    with connect() as conn:
        slot = conn.execute("SELECT opportunity_count, warnings FROM slot_run").fetchone()
    assert slot["opportunity_count"] == 0
    assert any("1 analyses had unverifiable evidence" in w["message"] for w in slot["warnings"])


def test_a_verified_analysis_outranks_a_higher_scored_unverified_one(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    _setup(fakes, BODY, "<p>另一篇：某光伏龙头签下百亿订单，组件价格企稳。</p>")

    def respond(body):
        if "储能集采" in _user(body):
            return answer(95, summary="编造的机会。", evidence=("千亿大单落地",))
        return answer(70, summary="光伏订单落地。", evidence=("光伏龙头签下百亿订单",))

    fakes.deepseek.responder = respond
    result = run_slot(SLOT)
    stored = {r["external_id"]: r for r in _analyses()}
    assert result["summary"]["top_analysis_id"] == stored["1-2"]["id"]
    [push] = fakes.sink.received
    assert "光伏订单落地" in push["message"] and f"/analysis/{stored['1-2']['id']}" in push["message"]


def test_no_opportunity_with_a_pushable_score_is_asked_again_then_kept_as_no(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "1")
    _setup(fakes, BODY)
    contradiction = json.loads(answer(75, evidence=("订单排产已至明年二季度",)))
    contradiction["has_opportunity"] = False
    fakes.deepseek.responder = lambda b: json.dumps(contradiction, ensure_ascii=False)
    result = run_slot(SLOT)
    users = fakes.deepseek.user_messages()
    assert len(users) == 2 and "相互矛盾" in users[1]
    [row] = _analyses()
    assert (row["score"], row["has_opportunity"]) == (59, False)
    assert "按“没有机会”处理" in row["consistency_note"] and row["result_json"]["checks"]["consistency"]
    assert result["branch"] == "skip_push"


def test_an_opportunity_far_below_the_threshold_loses_its_flag(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    _setup(fakes, BODY)
    claim = json.loads(answer(75, evidence=("订单排产已至明年二季度",)))
    claim.update(score=20, has_opportunity=True)
    fakes.deepseek.responder = lambda b: json.dumps(claim, ensure_ascii=False)
    run_slot(SLOT)
    [row] = _analyses()
    assert (row["score"], row["has_opportunity"]) == (20, False) and "远低于阈值" in row["consistency_note"]


def test_a_repaired_contradiction_costs_one_more_call_and_the_answer_stands(fakes):
    _setup(fakes, BODY)
    contradiction = json.loads(answer(75, evidence=("订单排产已至明年二季度",)))
    contradiction["has_opportunity"] = False
    fakes.deepseek.script = [json.dumps(contradiction, ensure_ascii=False)]
    fakes.deepseek.responder = lambda b: answer(72, evidence=("订单排产已至明年二季度",))
    run_slot(SLOT)
    [row] = _analyses()
    assert len(fakes.deepseek.requests) == 2 and (row["score"], row["has_opportunity"]) == (72, True)
    assert row["consistency_note"] is None and len(fakes.sink.received) == 1


def test_a_low_score_without_quotes_is_not_questioned(fakes):
    _setup(fakes, BODY)
    fakes.deepseek.responder = lambda b: answer(30)
    run_slot(SLOT)
    assert len(fakes.deepseek.requests) == 1
    [row] = _analyses()
    assert row["evidence_verified"] is None  # nothing to check: neither verified nor unverified


def test_a_refused_repair_call_keeps_the_valid_answer_already_paid_for(fakes):
    from include.radar_demo.fakes import api_error

    _setup(fakes, BODY)
    fakes.deepseek.script = [answer(80, evidence=("公司获得千亿大单",)),
                             api_error(400, "Content Exists Risk", "invalid_request_error")]
    result = run_slot(SLOT)
    assert len(fakes.deepseek.requests) == 2 and result["outcomes"][0]["status"] == "analysed"
    [row] = _analyses()
    assert row["evidence_verified"] is False and row["llm_calls"] == 2 and fakes.sink.received == []


# ------------------------------------------------------------------------------------------------ pages


def test_the_analysis_page_shows_verified_quotes_with_their_sentence_and_marks_the_rest(fakes):
    from tests.slotrun import read_page

    _setup(fakes, BODY + "<p>注意：<script>alert(1)</script>订单可能推迟。</p>")
    fakes.deepseek.responder = lambda b: answer(75, evidence=("订单排产已至明年二季度", "公司获得千亿大单"))
    run_slot(SLOT)
    [row] = _analyses()
    html = read_page(f"/analysis/{row['id']}", SLOT + timedelta(hours=1))
    assert 'href="#evidence-1"' in html and 'id="evidence-1"' in html
    assert "<mark>订单排产已至明年二季度</mark>" in html  # the sentence around it, the quote marked
    assert "未核实：原文中找不到" in html and "1 条证据未能在原文中找到" in html
    assert "<script>alert(1)</script>" not in html


def test_the_analysis_page_says_when_no_quote_verifies_and_why_a_score_was_changed(fakes, monkeypatch):
    from tests.slotrun import read_page

    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    _setup(fakes, BODY)
    contradiction = json.loads(answer(75, evidence=("公司获得千亿大单",)))
    contradiction["has_opportunity"] = False
    fakes.deepseek.responder = lambda b: json.dumps(contradiction, ensure_ascii=False)
    run_slot(SLOT)
    [row] = _analyses()
    html = read_page(f"/analysis/{row['id']}", SLOT + timedelta(hours=1))
    assert "证据未核实" in html and "不会触发推送" in html
    assert "评分与判断不一致" in html and "评分降为 59" in html


def test_a_forced_push_of_an_unverified_analysis_says_so_and_the_daily_page_marks_it(fakes, monkeypatch):
    from tests.slotrun import read_page

    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    _setup(fakes, BODY)
    fakes.deepseek.responder = lambda b: answer(88, evidence=("公司获得千亿大单",))
    run_slot(SLOT, run_type="manual", params={"push_mode": "force"})
    [push] = fakes.sink.received
    assert "（证据未核实）" in push["message"]
    html = read_page("/daily/2026-01-08", SLOT + timedelta(hours=1))
    assert "证据未核实" in html


def test_the_rubric_in_the_prompt_follows_the_configured_threshold(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_PUSH_SCORE_THRESHOLD", "70")
    _setup(fakes, BODY)
    fakes.deepseek.responder = lambda b: answer(30)
    run_slot(SLOT)
    system = fakes.deepseek.requests[0]["messages"][0]["content"]
    assert "推送阈值是 70 分" in system and "   - 70–89：" in system and "   - 30–69：" in system
    assert "<RUBRIC>" not in system and "<THRESHOLD>" not in system
    assert system.count("90–100") == 1  # each band written once
    from include.radar.analysis.rubric import rubric

    assert rubric(95).splitlines()[0].startswith("   - 95–100") and rubric(20).splitlines()[-1].startswith("   - 0–19")


def test_the_daily_report_never_makes_an_unverified_analysis_a_top_pick(fakes, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_RADAR_DEEPSEEK_MAX_RETRIES", "0")
    night = shanghai(2026, 1, 8, 22)
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}]
    fakes.werss.articles = [article(1, night - timedelta(hours=1), body=BODY, title="文章1"),
                            article(2, night - timedelta(hours=2), body="<p>另一篇：某光伏龙头签下百亿订单，组件价格企稳。</p>",
                                    title="文章2")]
    fakes.at(night)
    scores = {"储能集采": answer(95, summary="编造的机会。", evidence=("千亿大单落地公告",)),
              "光伏龙头": answer(70, summary="光伏订单落地。", evidence=("光伏龙头签下百亿订单",))}

    def respond(body):
        user = _user(body)
        if "<<<DATA_START>>>" in user:  # the digest: cites the unverified analysis first
            ids = [a["analysis_id"] for a in json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])["analyses"]]
            return json.dumps({"has_opportunity": True, "digest_md": "今日要点", "watchlist": [], "stats": {},
                               "top_opportunities": [{"analysis_id": i, "title": "t", "reason": "r"} for i in ids]},
                              ensure_ascii=False)
        return next(v for k, v in scores.items() if k in user)

    fakes.deepseek.responder = respond
    run_slot(night)
    stored = {r["external_id"]: r for r in _analyses()}
    with connect() as conn:
        report = conn.execute("SELECT digest_json, stats FROM daily_report").fetchone()
    tops = [t["analysis_id"] for t in report["digest_json"]["top_opportunities"]]
    assert tops == [stored["1-2"]["id"]] and stored["1-1"]["id"] in report["digest_json"]["dropped_analysis_ids"]
    assert report["stats"]["opportunities"] == 1


def test_the_analysis_page_names_the_rubric_band_of_its_score(fakes):
    from tests.slotrun import read_page

    _setup(fakes, BODY)
    fakes.deepseek.responder = lambda b: answer(75, evidence=("订单排产已至明年二季度",))
    run_slot(SLOT)
    [row] = _analyses()
    html = read_page(f"/analysis/{row['id']}", SLOT + timedelta(hours=1))
    assert "评分标准 60–89 分档：值得读者今天关注的机会" in html and "推送阈值 60 分" in html
