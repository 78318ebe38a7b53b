"""A month of the radar as its reader lives it: generated days of WeChat-like articles from eight accounts
(news, reposts of it, rewrites of it one to three days late in other words, late and missing bodies, a poison
row a day, a live-stream notice the reader's rule excludes), run slot by slot through the real steps on the
slots' clock (tests/slotrun.py), then counted as the reader would: how often each piece of news was pushed,
what was lost, stuck or analysed twice, what it cost in calls, the database's size and the slots' time.

Used by ``make bench-month`` (bench/month.py: 30 days) and, for a few days, by tests/test_month.py. The
stand-ins (``werss``, ``deepseek``, ``sink``) must already be what the environment's connections name.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import psycopg

from include.radar.core import db
from include.radar.core.slots import SHANGHAI, slot_at
from include.radar_demo.fakes import FakeArticle
from tests.slotrun import run_slot

SLOTS = ("07:00", "12:00", "14:00", "18:00", "22:00")
ACCOUNTS = [{"id": f"MP_WXS_{i}", "mp_name": name} for i, name in enumerate(
    ("财联快讯社", "价值投资笔记", "新能源研究院", "券商晨会", "电池产业链周报", "深度研究所", "港股日记", "周末财经茶话"), 1)]
COMPANIES = [("宁德时代", "300750", "电池一哥"), ("贵州茅台", "600519", "酒中龙头"), ("比亚迪", "002594", "车企巨头"),
             ("隆基绿能", "601012", "光伏老大"), ("中微公司", "688012", "刻蚀设备商"), ("恒瑞医药", "600276", "创新药龙头"),
             ("北方华创", "002371", "设备平台"), ("招商银行", "600036", "零售之王"), ("阳光电源", "300274", "逆变器龙头"),
             ("万华化学", "600309", "化工巨头"), ("海天味业", "603288", "调味品大王"), ("中际旭创", "300308", "光模块龙头"),
             ("紫金矿业", "601899", "矿业巨头"), ("美的集团", "000333", "家电龙头"), ("中国平安", "601318", "保险一哥"),
             ("迈瑞医疗", "300760", "器械龙头"), ("三一重工", "600031", "工程机械王"), ("立讯精密", "002475", "果链龙头"),
             ("长江电力", "600900", "水电之王"), ("东方财富", "300059", "券商新贵"), ("海康威视", "002415", "安防龙头"),
             ("药明康德", "603259", "医药外包龙头"), ("寒武纪", "688256", "AI 芯片新星"), ("中国神华", "601088", "煤炭巨头")]
ACTIONS = [  # (what the company announced, the same in other words), with its figures
    ("拟以 {a} 亿元至 {b} 亿元回购股份，回购价格不超过 {p} 元/股", "准备掏出 {a} 到 {b} 亿元买回自家股票，出价最高 {p} 元"),
    ("中标 {a} 亿元项目，毛利率约 {q}%", "又拿下一笔总额 {a} 亿元的大单，毛利能有 {q}%"),
    ("每股派发现金红利 {p} 元，合计约 {a} 亿元", "给股东每股发 {p} 元现金，总共要花 {a} 亿元"),
    ("投资 {a} 亿元扩产，新增产能 {b} 万吨", "砸下 {a} 亿元扩大生产，一年能多出 {b} 万吨"),
]
OPENINGS = ("{nick}又有新动作：", "说说{nick}这件事：", "{nick}出手，", "市场热议{nick}：", "刚刚，{nick}宣布")
CLOSINGS = ("我们认为这值得重视。", "后续影响有待观察。", "值得长期跟踪。", "短期情绪或有提振。", "风险提示：不构成投资建议。",
            "市场关注后续进展。", "具体以公告为准。")
REWRITE_TITLES = ("{nick}出手了", "{nick}这步棋怎么看", "三天后再看{nick}", "{nick}的底气从哪来", "读懂{nick}的新动作",
                  "周末复盘：{nick}", "{nick}，信号意味深长")
CONTEXT = ("公司表示资金来源为自有资金", "董事会已审议通过", "尚需股东大会批准", "实施期限为十二个月", "此举符合公司战略规划",
           "公告发布后股价盘中异动", "多家机构此前已有预期", "相关事项不构成重大资产重组", "公司现金流较为充裕",
           "项目所在地政府给予配套支持", "交易对手方为独立第三方", "此前公司曾两度提示相关进展")
VIEWS = ("管理层信心可见一斑", "估值有望修复", "短期催化剂明确", "长期逻辑没有改变", "资金面或将受益", "行业格局进一步优化",
         "市场情绪有望回暖", "业绩弹性值得期待", "不过执行层面仍需观察", "同行或将跟进")
RULE = "!直播"  # the reader's rule: a live-stream notice is never analysed
THRESHOLD = 60


@dataclass
class Piece:
    """One generated article and what it stands for."""

    article: FakeArticle
    news: int | None  # the piece of news it tells (None: the excluded notice)
    kind: str  # news, repost, rewrite, notice
    score: int = 0
    quote: str = ""
    target: str = ""


@dataclass
class Month:
    pieces: list[Piece] = field(default_factory=list)
    poison: int = 0
    missing: int = 0  # articles whose body WeRSS never serves
    late: int = 0  # articles whose body comes hours after the article

    def by_id(self) -> dict[str, Piece]:
        return {p.article.id: p for p in self.pieces}


def generate(first_day: date, days: int, seed: int = 49) -> tuple[Month, dict[int, list[Piece]]]:
    """The month's pieces, and per day offset the pieces published that day (the rewrites of earlier news
    included)."""
    rng = random.Random(seed)
    month, daily, n, used = Month(), {d: [] for d in range(days)}, 0, {}
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        start = datetime.combine(day, datetime.min.time(), tzinfo=SHANGHAI).replace(hour=6, minute=5)
        for _ in range(rng.randint(16, 30)):
            n += 1
            # one company's one kind of announcement at most once in four days: two of them would be one event
            name, code, _nick = rng.choice(COMPANIES)
            said, _ = rng.choice(ACTIONS)
            for _ in range(100):  # 96 of them: a few days' news always find one
                if used.get((name, said), -9) <= offset - 4:
                    break
                name, code, _nick = rng.choice(COMPANIES)
                said, _ = rng.choice(ACTIONS)
            used[(name, said)] = offset
            figures = {"a": rng.randint(11, 98) * 10 + rng.randint(1, 9), "b": rng.randint(100, 990),
                       "p": f"{rng.randint(10, 500)}.{rng.randint(10, 99)}", "q": rng.randint(11, 49)}
            fact = said.format(**figures)
            at = start + timedelta(minutes=rng.randrange(15 * 60))
            account = rng.choice(ACCOUNTS)["id"]
            html = (f"<p>{name}（{code}）{at:%m月%d日}公告，{fact}。{'，'.join(rng.sample(CONTEXT, 2))}。</p>"
                    f"<p>{rng.choice(CLOSINGS)}</p>")
            piece = Piece(_article(f"n{n}", account, f"{name}公告：{fact[:12]}（{n}）", at, html), n, "news",
                          rng.choice([30, 45, 52, 58, 62, 66, 71, 78, 85]), fact, f"{name}({code})")
            roll = rng.random()
            if roll < 0.06:
                piece.article.content_html, month.missing = "", month.missing + 1
            elif roll < 0.14:
                piece.article.body_after, month.late = int((at + timedelta(hours=rng.randint(2, 20))).timestamp()), \
                    month.late + 1
            daily[offset].append(piece)
            if piece.score >= THRESHOLD and piece.article.body_after is None and piece.article.content_html \
                    and rng.random() < 0.3:
                _rewrite(daily, first_day, piece, dict(ACTIONS)[said].format(**figures),
                         at + timedelta(hours=rng.uniform(20, 70)), rng)
            if rng.random() < 0.12:  # a repost: the same body, another account, an hour or more later
                again = at + timedelta(hours=rng.randint(1, 6))
                daily[min(offset + (again.date() > day), days - 1)].append(Piece(_article(
                    f"r{n}", _other(account, rng), f"【转载】{piece.article.title}", again, html), n, "repost",
                    piece.score, fact, piece.target))
        notice = start + timedelta(hours=rng.randint(1, 12))
        daily[offset].append(Piece(_article(f"live{offset}", rng.choice(ACCOUNTS)["id"], f"今晚直播：{day:%m月%d日}盘后答疑",
                                            notice, "<p>直播预告：今晚八点，不见不散。</p>"), None, "notice"))
        month.poison += 1
    month.pieces = [p for d in range(days) for p in daily[d]]
    return month, daily


def _rewrite(daily: dict[int, list[Piece]], first_day: date, piece: Piece, retold: str, when: datetime,
             rng: random.Random) -> None:
    """The news retold by another account, in other words, ``when`` (a day to three later): the company's
    nickname for its name, the same figures, a score as high or higher."""
    offset = (when.date() - first_day).days
    if offset not in daily:
        return
    name, code = piece.target.split("(")[0], piece.target.split("(")[1].rstrip(")")
    nick = next(c[2] for c in COMPANIES if c[0] == name)
    html = (f"<p>{rng.choice(OPENINGS).format(nick=nick)}{retold}。{'，'.join(rng.sample(VIEWS, 2))}。</p>"
            f"<p>{rng.choice(CLOSINGS)}</p>")
    title = rng.choice(REWRITE_TITLES).format(nick=nick) + f"（{piece.news}）"
    daily[offset].append(Piece(_article(f"w{piece.news}", _other(piece.article.mp_id, rng), title, when, html),
                               piece.news, "rewrite", min(95, piece.score + rng.choice([0, 3, 6])), retold,
                               f"{name}({code})"))


def _article(aid: str, mp_id: str, title: str, at: datetime, html: str) -> FakeArticle:
    return FakeArticle(id=aid, mp_id=mp_id, title=title, publish_time=int(at.timestamp()),
                       content_html=f'<div class="rich_media_content" id="js_content">{html}</div>',
                       url=f"https://mp.weixin.qq.com/s/{aid}")


def _other(account: str, rng: random.Random) -> str:
    return rng.choice([a["id"] for a in ACCOUNTS if a["id"] != account])


def responder(month: Month) -> Any:
    """DeepSeek as the stand-in answers: each article's score, its own words as the evidence, its company as
    the target; the daily digest picks the day's opportunities."""
    by_title = {p.article.title: p for p in month.pieces}

    def respond(body: dict) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "<<<DATA_START>>>" in user:  # the daily digest: the day's opportunities, as its analyses scored them
            data = json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])
            picks = [a for a in data["analyses"] if a["score"] >= THRESHOLD][:5]
            return json.dumps({"has_opportunity": bool(picks), "digest_md": "## 今日要点",
                               "top_opportunities": [{"analysis_id": a["analysis_id"], "title": "公告", "reason": "评分高"}
                                                     for a in picks]}, ensure_ascii=False)
        found = re.search(r"^标题：(.*)$", user, re.MULTILINE)
        piece = by_title.get(found.group(1).strip()) if found else None
        score, quote, target = (piece.score, piece.quote, piece.target) if piece else (20, "", "")
        return json.dumps({
            "score": score, "has_opportunity": score >= THRESHOLD, "top_type": "stock" if score >= THRESHOLD else "none",
            "summary": "公司公告。", "opportunities": [{
                "name": target, "type": "stock", "targets": [target], "direction": "bullish", "horizon": "1-3个月",
                "catalyst": "公告", "risks": ["执行"], "evidence": [quote], "confidence": 0.7}] if score >= THRESHOLD else []},
            ensure_ascii=False)

    return respond


@dataclass
class Figures:
    days: int
    articles: int
    pushes_per_news: dict[int, int]
    above: set[int]  # news analysed at or above the threshold
    lost: list[str]
    stuck: list[str]
    twice: list[str]
    llm_calls: int
    analysable: int
    mb_per_day: list[float]
    connections: int
    slot_seconds: list[float]  # mean slot time of each day
    rewrites: int = 0  # rewrites the radar took in
    rewrites_joined: int = 0  # ... grouped with the news they retell
    rewrites_of_pushed: int = 0  # ... of news a push told of

    @property
    def pushed_twice(self) -> dict[int, int]:
        return {n: c for n, c in self.pushes_per_news.items() if c > 1}


def run(werss: Any, deepseek: Any, month: Month, daily: dict[int, list[Piece]], first_day: date, url: str,
        log: Any = None) -> Figures:
    """The month, day by day, five slots a day, each on its own clock; then the reader's count."""
    werss.accounts = list(ACCOUNTS)
    deepseek.responder = responder(month)
    from include.radar import store
    from include.radar.analysis import focus

    profile = focus.Profile.build(rules=[RULE])
    with db.connect(url) as conn:
        store.focus.save_profile(conn, {"companies": [], "tickers": [], "sectors": [], "interests": [],
                                  "rules": profile.rule_lines()}, "month")
    sizes, times = [], []
    for offset in range(len(daily)):
        day = first_day + timedelta(days=offset)
        werss.articles.extend(p.article for p in daily[offset])
        werss.extra_rows = {ACCOUNTS[offset % len(ACCOUNTS)]["id"]: [json.dumps(
            {"id": f"poison-{offset}", "mp_id": ACCOUNTS[offset % len(ACCOUNTS)]["id"], "title": "坏\u0000行",
             "publish_time": "not a time", "status": 1})]}
        spent = []
        for slot in SLOTS:
            key = slot_at(day, slot)
            werss.now = lambda key=key: int(key.scheduled_at.timestamp()) + 60
            started = time.perf_counter()
            result = run_slot(key.scheduled_at, now=key.scheduled_at + timedelta(minutes=1))
            spent.append(time.perf_counter() - started)
            if result["errors"] and log:
                log(f"  {day} {slot}: step errors {result['errors']}")
        horizon = int((datetime.combine(day, datetime.min.time(), tzinfo=SHANGHAI) - timedelta(days=4)).timestamp())
        werss.articles = [a for a in werss.articles if a.publish_time >= horizon]
        with db.connect(url) as conn:
            sizes.append(conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()["b"] / 2**20)
        times.append(sum(spent) / len(spent))
        if log:
            log(f"  day {offset + 1}/{len(daily)} ({day}): {sizes[-1]:.1f} MB, slots {times[-1]:.2f} s on average, "
                f"{len(deepseek.requests)} LLM calls so far")
    # the next morning's slot takes what the last one left for it (a repost waits for its twin's analysis)
    close = slot_at(first_day + timedelta(days=len(daily)), SLOTS[0])
    werss.now = lambda: int(close.scheduled_at.timestamp()) + 60
    run_slot(close.scheduled_at, now=close.scheduled_at + timedelta(minutes=1))
    return _count(month, deepseek, url, sizes, times, int(close.scheduled_at.timestamp()))


def _count(month: Month, deepseek: Any, url: str, sizes: list[float], times: list[float], end: int) -> Figures:
    pieces = month.by_id()
    with db.connect(url) as conn:
        items = {r["external_id"]: r for r in conn.execute(
            "SELECT c.external_id, c.analyzed_status, c.body_status, count(a.id) AS analyses, max(a.score) AS score, "
            "min(a.event_id) AS event FROM content_item c LEFT JOIN analysis_result a ON a.content_item_id = c.id "
            "GROUP BY c.id").fetchall()}
        told = conn.execute(
            "SELECT n.report_date, n.slot, c.external_id FROM notification_log n "
            "JOIN analysis_result a ON a.id = substring(n.target_url FROM '/analysis/([0-9]+)$')::bigint "
            "  OR a.id = ANY(n.shown_ids) "
            "JOIN content_item c ON c.id = a.content_item_id "
            "WHERE n.push_type = 'opportunity' AND n.status IN (1, 3)").fetchall()
    db.close_pools()  # what the slots' pools hold is theirs; anything still connected after it was left open
    with psycopg.connect(url) as bare:
        others = bare.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                              "AND pid <> pg_backend_pid()").fetchone()[0]
    slots_of: dict[int, set[tuple[Any, str]]] = {}
    for row in told:
        news = pieces[row["external_id"]].news
        slots_of.setdefault(news, set()).add((row["report_date"], row["slot"]))
    kept = [p for p in month.pieces if p.kind != "notice"]
    # lost: published by the closing slot and never stored
    lost = [p.article.id for p in month.pieces if p.article.id not in items and p.article.publish_time <= end]
    # stuck: stored with a body, neither analysed, reused, excluded nor given up on (the statuses of store/claims.py)
    stuck = [i for i, r in items.items() if r["body_status"] == 1 and r["analyzed_status"] in (0, 1, 3) and r["analyses"] == 0]
    asked: dict[str, int] = {}
    analyses = [r for r in deepseek.requests if re.search(r"^标题：", r["messages"][1]["content"], re.MULTILINE)]
    for request in analyses:
        found = re.search(r"^标题：(.*)$", request["messages"][1]["content"], re.MULTILINE)
        if found:
            asked[found.group(1).strip()] = asked.get(found.group(1).strip(), 0) + 1
    twice = [t for t, c in asked.items() if c > 1] + [i for i, r in items.items() if r["analyses"] > 1]
    above = {pieces[i].news for i, r in items.items() if r["score"] is not None and r["score"] >= THRESHOLD
             and pieces[i].news is not None}
    rewrites = [p for p in month.pieces if p.kind == "rewrite" and p.article.id in items]
    joined = sum(1 for p in rewrites if items[p.article.id]["event"] is not None
                 and items[p.article.id]["event"] == items.get(f"n{p.news}", {}).get("event"))
    return Figures(len(sizes), len(kept), {n: len(s) for n, s in slots_of.items()}, above, lost, stuck, twice,
                   len(analyses), sum(1 for p in kept if p.article.content_html and (
                       p.kind != "repost" or not pieces[f"n{p.news}"].article.content_html)),  # its twin had none
                   sizes, others, times, len(rewrites), joined, sum(1 for p in rewrites if p.news in slots_of))
