"""WeChat-like article pages and DeepSeek-like answers to them, for the benchmarks that must look like a
reader's day (``make bench-slot``, ``make bench-growth``).

A real WeChat article, as WeRSS hands it over, is tens of kilobytes of HTML for a few thousand characters of
text: every paragraph wrapped in ``<section>``/``<p>``/``<span>`` with inline styles, images with ``data-src``,
section banners, a follow card and a disclaimer (the demo's recorded articles in ``data/articles.json`` have the
same markup, shortened). :func:`page` writes one such page, about 30 kB (UTF-8) by default, from a seed: the same seed
gives the same page. :func:`answer` writes the analysis a thinking model would give it: a score, and for a
promising article opportunities whose evidence quotes sentences of the page verbatim, so the radar's evidence
check, grouping and push all run as they do on real days.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

SECTORS = (
    ("储能", "宁德时代", "300750"), ("光伏", "隆基绿能", "601012"), ("半导体设备", "北方华创", "002371"),
    ("白酒", "贵州茅台", "600519"), ("创新药", "恒瑞医药", "600276"), ("算力", "中际旭创", "300308"),
    ("人形机器人", "汇川技术", "300124"), ("券商", "中信证券", "600030"), ("汽车", "比亚迪", "002594"),
    ("航运", "中远海控", "601919"), ("黄金", "山东黄金", "600547"), ("铜", "紫金矿业", "601899"),
)
OPENINGS = ("据产业链调研，", "从最新披露的数据看，", "我们注意到，", "值得关注的是，", "综合渠道反馈，", "从历史经验看，")
FACTS = (
    "{company}三季度订单同比增长{n}%，环比提升{m}个百分点",
    "{sector}板块本周成交额放大至{n}亿元，较上周增加{m}%",
    "{company}公告拟以{n}亿元回购股份，回购价格上限为{m}元",
    "{sector}行业库存周转天数下降至{n}天，为近{m}个月低位",
    "{company}新产线良率提升至{n}%，预计下季度出货{m}万台",
    "{sector}主要原材料价格较年初下跌{n}%，毛利率有望修复{m}个百分点",
)
VIEWS = (
    "这意味着行业景气度正在边际改善，龙头公司的议价能力有望进一步增强。",
    "短期来看估值已部分反映预期，但中期的业绩兑现仍有空间。",
    "市场对此的分歧主要集中在需求的持续性上，后续需要跟踪月度数据的验证。",
    "政策端的支持力度仍在加码，产业资本的开支意愿明显回暖。",
    "从海外映射来看，同类公司的订单节奏同样在加快，全球需求共振的迹象正在出现。",
    "不过价格战的风险尚未完全解除，二三线厂商的出清仍需时间。",
)
BANNER = ('<section style="text-align: center;margin: 20px 0 10px;"><section style="display: inline-block;'
          'background-color: #b8860b;padding: 4px 14px;border-radius: 4px;"><p><span style="color: rgb(255, 255, '
          '255);font-size: 15px;"><strong>{title}</strong></span></p></section></section>')
PARAGRAPH = ('<p style="margin-bottom: 12px;line-height: 1.75em;letter-spacing: 0.5px;text-align: justify;">'
             '<span style="font-size: 15px;color: rgb(62, 62, 62);font-family: -apple-system, BlinkMacSystemFont, '
             "'Helvetica Neue', 'PingFang SC', 'Hiragino Sans GB', 'Microsoft YaHei UI', Arial, sans-serif;\">"
             "{text}</span></p>")
IMAGE = ('<section style="text-align: center;margin: 10px 0;"><img class="rich_pages wxw-img" data-ratio="0.5625" '
         'data-s="300,640" data-type="png" data-w="1080" style="width: 100%;height: auto;border-radius: 4px;" '
         'data-src="https://mmbiz.qpic.cn/mmbiz_png/{key}/640?wx_fmt=png&amp;from=appmsg" /></section>'
         '<p style="text-align: center;"><span style="font-size: 12px;color: rgb(136, 136, 136);">图{n}：{caption}'
         "（资料来源：公司公告，Wind）</span></p>")
FOOTER = ('<section style="margin-top: 24px;padding: 12px;background-color: rgb(247, 247, 247);border-radius: 6px;">'
          '<p><span style="font-size: 12px;color: rgb(136, 136, 136);">风险提示：本文仅为行业研究交流，不构成任何投资建议。'
          "市场有风险，投资需谨慎。文中数据来自公开资料，作者力求准确但不保证其完整性。</span></p></section>"
          '<section style="text-align: center;margin-top: 16px;"><p><span style="font-size: 14px;color: rgb(178, 34, '
          '34);"><strong>点击上方蓝字关注我们，获取每日研究速递</strong></span></p></section>')


@dataclass
class Page:
    title: str
    html: str
    facts: list[str] = field(default_factory=list)  # sentences of the text, quotable verbatim as evidence
    sector: str = ""
    company: str = ""
    code: str = ""


def page(seed: int | str, *, size: int = 30_000) -> Page:
    """A WeChat article page of about ``size`` bytes of HTML (styles, banners, images, footer) whose text is
    made of facts (numbers about one sector and company) and views; the same ``seed`` gives the same page."""
    rng = random.Random(f"wechat-page:{seed}")
    sector, company, code = rng.choice(SECTORS)
    facts: list[str] = []
    parts = ['<div class="rich_media_content js_underline_content autoTypeSetting24psection" id="js_content" '
             'style="visibility: hidden;"><section style="padding: 0 8px;box-sizing: border-box;"><p><br></p>']
    length = sum(len(p.encode()) for p in parts)
    section = 0
    while length < size - len(FOOTER.encode()) - 2000:
        section += 1
        chunk = [BANNER.format(title=f"{'一二三四五六七八九十'[(section - 1) % 10]}、{rng.choice(('行情回顾', '数据跟踪', '产业观察', '投资逻辑', '风险因素'))}")]
        for _ in range(rng.randint(2, 4)):
            sentences = []
            for _ in range(rng.randint(2, 3)):
                fact = rng.choice(FACTS).format(company=company, sector=sector, n=rng.randint(5, 95), m=rng.randint(2, 30))
                facts.append(fact)
                sentences.append(rng.choice(OPENINGS) + fact + "。" + rng.choice(VIEWS))
            chunk.append(PARAGRAPH.format(text="".join(sentences)))
        if rng.random() < 0.6:
            chunk.append(IMAGE.format(key=f"{rng.getrandbits(120):030x}", n=section, caption=f"{sector}行业景气度跟踪"))
        parts.extend(chunk)
        length += sum(len(c.encode()) for c in chunk)
    parts.append(FOOTER + "</section></div>")
    title = (f"{sector}｜{company}：{rng.choice(('订单拐点已现', '景气回升的信号', '还能上车吗', '一份渠道调研纪要', '估值与业绩的赛跑'))}"
             f"（{rng.randint(1, 10**6)}）")  # a title is its article's own, as on real days
    return Page(title=title, html="".join(parts), facts=facts, sector=sector, company=company, code=code)


def answer(article: Page, score: int) -> str:
    """The analysis JSON a thinking model would give ``article`` at ``score``: from 60 up, one or two
    opportunities whose evidence quotes the page's own sentences (verifiable), naming its company's code."""
    promising = score >= 60
    opportunities = []
    if promising:
        opportunities.append({
            "name": f"{article.company}订单放量", "type": "stock", "targets": [article.company, article.code],
            "direction": "bullish", "horizon": "1-3个月", "catalyst": article.facts[0],
            "risks": ["需求不及预期", "价格战"], "evidence": article.facts[:2], "confidence": round(score / 100, 2),
        })
        if score >= 75:
            opportunities.append({
                "name": f"{article.sector}板块景气回升", "type": "sector", "targets": [article.sector],
                "direction": "bullish", "horizon": "3-6个月", "catalyst": article.facts[2],
                "risks": ["政策变化"], "evidence": [article.facts[2]], "confidence": 0.6,
            })
    return json.dumps({
        "score": score, "has_opportunity": promising, "top_type": "stock" if promising else "none",
        "summary": f"{article.company}所在的{article.sector}行业数据边际改善：{article.facts[0]}。"
                   + ("建议跟踪订单兑现。" if promising else "暂无明确的交易机会。"),
        "opportunities": opportunities,
    }, ensure_ascii=False)
