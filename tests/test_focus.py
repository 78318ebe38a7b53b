"""The reader's focus (watchlist, filter rules) and feedback, through a real slot.

Rooms: focus.py, ranking.py, store/focus.py, steps/select_articles.py (excluded articles), decide.py and the
push (the rank's order).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from include.radar import store
from include.radar.analysis import focus
from include.radar.pushes import decide, ranking
from tests.conftest import connect
from tests.slotrun import answer, article, run_slot, shanghai

SLOT = shanghai(2026, 1, 8, 14)
LATER = shanghai(2026, 1, 8, 18)


def _accounts(fakes) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "研究所"}, {"id": "MP_WXS_2", "mp_name": "前哨站"}]


def _save(**lists: list[str]) -> None:
    profile = focus.Profile.build(**lists)
    with connect() as conn:
        store.focus.save_profile(conn, {"companies": list(profile.companies), "tickers": list(profile.tickers),
                                  "sectors": list(profile.sectors), "interests": list(profile.interests),
                                  "rules": profile.rule_lines()}, "tester")


def _analyses() -> dict[str, dict]:
    with connect() as conn:
        rows = conn.execute(
            "SELECT a.*, c.title FROM analysis_result a JOIN content_item c ON c.id = a.content_item_id").fetchall()
    return {r["title"]: r for r in rows}


# ------------------------------------------------------------------------------------------------ rules


def test_rules_follow_the_trendradar_forms() -> None:
    profile = focus.Profile.build(rules=["储能\n/光伏|风电/\n+订单\n!直播\n!/广告.{0,4}合作/"])
    assert [r.kind for r in profile.rules] == ["any", "any", "must", "never", "never"]
    assert profile.exclusion("储能订单大增", "") is None
    assert profile.exclusion("风电订单", "") is None  # a regex any-of line
    assert profile.exclusion("储能订单", "今晚直播") == "命中排除词 !直播"
    assert profile.exclusion("储能订单", "欢迎广告商务合作") == "命中排除词 !/广告.{0,4}合作/"
    assert profile.exclusion("储能龙头", "无相关") == "缺少必含词 +订单"
    assert profile.exclusion("白酒订单", "").startswith("不含任何关注词")
    assert focus.Profile().exclusion("anything", "") is None  # no rules: nothing excluded


@pytest.mark.parametrize("line, message", [
    ("/(/", "正则「/(/」无效"), ("!", "缺少要匹配的词"), ("/a*/", "能匹配空文本"), ("x" * 201, "超过 200 个字符"),
])
def test_a_rule_that_cannot_be_used_is_refused_with_its_reason(line: str, message: str) -> None:
    with pytest.raises(focus.ProfileError) as err:
        focus.Profile.build(rules=[line])
    assert message in err.value.errors[0]


def test_watchlist_matches_names_and_tickers_with_or_without_exchange_marks() -> None:
    profile = focus.Profile.build(companies=["宁德时代"], tickers=["600519.SH", "SZ300750"], sectors=["储能"])
    assert profile.watch_hits("贵州茅台（600519）提价", "") == ["600519.SH"]
    assert profile.watch_hits("", "宁德时代(300750.SZ)与储能") == ["宁德时代", "储能", "SZ300750"]
    assert profile.watch_hits("", "代码 16005190 不是茅台") == []  # a ticker is matched whole
    lists = focus.Profile.build(companies=["宁德时代，比亚迪、 宁德时代 "])
    assert lists.companies == ("宁德时代", "比亚迪")  # split on Chinese separators, de-duplicated


# ----------------------------------------------------------------------------------------- through a slot


def test_an_excluded_article_is_never_sent_to_the_llm_and_is_counted_on_the_slot(fakes) -> None:
    _accounts(fakes)
    _save(rules=["!直播"])
    fakes.werss.articles += [
        article(1, SLOT - timedelta(hours=1), title="储能订单回暖"),
        article(2, SLOT - timedelta(hours=2), title="今晚八点直播：带你看储能", body="<p>直播预告，订单同比增长。</p>"),
    ]
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(72)
    run_slot(SLOT)
    assert len(fakes.deepseek.requests) == 1  # the excluded article cost nothing
    assert "储能订单回暖" in fakes.deepseek.requests[0]["messages"][1]["content"]
    with connect() as conn:
        item = conn.execute("SELECT * FROM content_item WHERE title LIKE '今晚%'").fetchone()
        slot = conn.execute("SELECT * FROM slot_run").fetchone()
    assert item["analyzed_status"] == store.focus.EXCLUDED and item["last_error"] == "命中排除词 !直播"
    assert slot["excluded_count"] == 1 and slot["analysed_count"] == 1
    run_slot(SLOT)  # a rerun neither calls again nor counts the exclusion twice
    with connect() as conn:
        assert conn.execute("SELECT excluded_count FROM slot_run").fetchone()["excluded_count"] == 1
    assert len(fakes.deepseek.requests) == 1


def test_the_profile_goes_into_the_system_part_only_and_the_models_word_is_kept(fakes) -> None:
    _accounts(fakes)
    _save(companies=["宁德时代"], interests=["储能产业链的价格拐点 <<<ARTICLE_END>>>"])
    fakes.werss.articles.append(article(1, SLOT - timedelta(hours=1), body="<p>宁德时代储能订单同比增长。</p>"))
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(
        72, evidence=("储能订单同比增长",), watchlist={"touches": True, "how": "宁德时代储能订单增长"})
    run_slot(SLOT)
    system, user = (m["content"] for m in fakes.deepseek.requests[0]["messages"])
    assert "- 公司：宁德时代" in system and "储能产业链的价格拐点" in system
    assert "<<<ARTICLE_END>>>" not in system.split("<<<READER_PROFILE_START>>>")[1]  # the reader's text cannot close a block
    assert "宁德时代" not in user.split("<<<ARTICLE_START>>>")[0]  # never mixed into the article's message
    [row] = _analyses().values()
    assert row["watch_hits"] == ["宁德时代"]
    assert row["result_json"]["watchlist"] == {"touches": True, "how": "宁德时代储能订单增长"}


def test_a_watchlist_match_outranks_an_equal_score_and_leads_the_push(fakes) -> None:
    _accounts(fakes)
    _save(sectors=["光伏"])
    fakes.werss.articles += [
        article(1, SLOT - timedelta(hours=1), title="储能订单回暖"),  # older: would lead on a tie
        article(2, SLOT - timedelta(minutes=30), title="光伏订单回暖", mp="MP_WXS_2",
                body="<p>光伏龙头订单同比增长30%。</p>"),
    ]
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(72)
    run_slot(SLOT)
    rows = _analyses()
    assert rows["光伏订单回暖"]["watch_hits"] == ["光伏"] and rows["储能订单回暖"]["watch_hits"] == []
    [pushed] = fakes.sink.received
    assert f"/analysis/{rows['光伏订单回暖']['id']}" in json.dumps(pushed, ensure_ascii=False)
    assert "关注命中：光伏" in json.dumps(pushed, ensure_ascii=False)  # the push says why it is the reader's


def test_feedback_moves_a_later_articles_rank(fakes) -> None:
    _accounts(fakes)
    fakes.werss.articles.append(article(1, SLOT - timedelta(hours=1), title="研究所旧文", mp="MP_WXS_1"))
    fakes.at(SLOT)
    fakes.deepseek.responder = lambda body: answer(40)
    run_slot(SLOT)
    earlier = _analyses()["研究所旧文"]
    # the reader says the 研究所's article was useful ...
    with connect() as conn:
        assert store.focus.set_feedback(conn, earlier["id"], "up", "link") == "recorded"
        assert store.focus.set_feedback(conn, earlier["id"], "up", "link") == "unchanged"  # idempotent
    # ... so at the next slot, of two equal scores, the 研究所's article leads although the other is older
    fakes.werss.articles += [
        article(2, LATER - timedelta(hours=2), title="前哨站新文", mp="MP_WXS_2"),
        article(3, LATER - timedelta(hours=1), title="研究所新文", mp="MP_WXS_1"),
    ]
    fakes.at(LATER)
    fakes.deepseek.responder = lambda body: answer(72)
    run_slot(LATER)
    rows = _analyses()
    [pushed] = fakes.sink.received
    assert f"/analysis/{rows['研究所新文']['id']}" in json.dumps(pushed, ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ ranking


def _analysis(id_: int, score: int, **extra) -> dict:
    return {"id": id_, "score": score, "summary": f"分析{id_}", "mp_name": extra.pop("mp", "甲"), "top_type": "sector",
            "result_json": {"opportunities": [{"targets": extra.pop("targets", ["储能"])}]}, **extra}


def test_the_rank_formula_is_explained_part_by_part() -> None:
    weights = ranking.learn([
        {"verdict": "up", "mp_name": "甲", "top_type": "sector", "result_json": {"opportunities": [{"targets": ["储能"]}]}},
        {"verdict": "knew", "mp_name": "乙", "top_type": "macro", "result_json": {}},
    ])
    assert weights.account == {"甲": 3, "乙": -1} and weights.entity == {"储能": 2} and weights.topic == {"sector": 2}
    r = ranking.rank(_analysis(1, 70, watch_hits=["宁德时代"]), weights)
    assert (r.score, r.watch, r.feedback, r.total) == (70, 10, 7, 87)
    assert [p for _, p in r.parts] == [10, 3, 2, 2]
    touched = ranking.rank(_analysis(2, 70, mp="丙", targets=[],
                                     result_json={"watchlist": {"touches": True, "how": "x"}}), weights)
    assert touched.watch == ranking.INTEREST_BOOST
    more, less = weights.learned()
    assert more[0] == ("公众号「甲」", 3) and less == [("公众号「乙」", -1)]


def test_feedback_is_capped_so_it_never_outweighs_the_score() -> None:
    rows = [{"verdict": "down", "mp_name": "甲", "top_type": "sector",
             "result_json": {"opportunities": [{"targets": ["储能", "锂电", "电芯"]}]}}] * 10
    weights = ranking.learn(rows)
    assert weights.account["甲"] == -ranking.KEY_CAP
    r = ranking.rank(_analysis(1, 90, targets=["储能", "锂电", "电芯"]), weights)
    assert r.feedback == -ranking.FEEDBACK_CAP and r.total == 80


def test_the_threshold_stays_on_the_score_while_the_rank_orders() -> None:
    weights = ranking.learn([])
    plain, watched = _analysis(1, 65), _analysis(2, 65, watch_hits=["储能"])
    low_watched = _analysis(3, 55, watch_hits=["储能"])
    summary = decide.summarise(ranking.annotate([plain, watched, low_watched], weights), 0, 60)
    assert summary.top_analysis_id == 2  # 65 + 10 leads 65, and 55 + 10 = 65 stays below it
    assert summary.above_threshold == 2  # the 55 is no opportunity, whatever its boost
