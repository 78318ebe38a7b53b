"""Which tradable instrument a pick's targets name (pure: no source, no database).

An instrument is a key ``MARKET:CODE`` (``SH:600519``, ``SZ:300750``, ``BJ:830799``, ``HK:00700``, ``HKI:HSI``,
``SW:801081``). A target is tried as a code in any spelling (a name beside it must agree with the code's listed
name), an index by name, a sector mapped to a Shenwan industry index (SECTORS), then a company name that exactly
one listing matches. Anything else, a contradiction or a name two listings share, is "not measurable" with the
reason, never another company's figures. The rules, with examples: docs/track-record.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date

CN, HK = "CN", "HK"  # calendars: the A-share exchanges (and Shenwan's indices, computed on their days), Hong Kong


@dataclass(frozen=True)
class Instrument:
    market: str  # SH, SZ, BJ, HK, HKI, SW
    code: str
    kind: str  # stock, etf, index
    name: str = ""

    @property
    def key(self) -> str:
        return f"{self.market}:{self.code}"

    @property
    def calendar(self) -> str:
        return HK if self.market in ("HK", "HKI") else CN

    @property
    def label(self) -> str:
        return f"{self.name}（{self.code}）" if self.name else self.code


CSI300 = Instrument("SH", "000300", "index", "沪深300")
# the CSI 300 with its dividends reinvested (CSI's series): the benchmark of backward-adjusted stocks and ETFs
CSI300TR = Instrument("CSI", "H00300", "index", "沪深300全收益")
HSI = Instrument("HKI", "HSI", "index", "恒生指数")

# well-known indices by name (the benchmarks among them); a name is matched whole
INDEX_NAMES: dict[str, Instrument] = {
    "沪深300": CSI300, "沪深300指数": CSI300,
    "上证指数": Instrument("SH", "000001", "index", "上证指数"), "上证综指": Instrument("SH", "000001", "index", "上证指数"),
    "上证综合指数": Instrument("SH", "000001", "index", "上证指数"),
    "上证50": Instrument("SH", "000016", "index", "上证50"),
    "科创50": Instrument("SH", "000688", "index", "科创50"),
    "中证500": Instrument("SH", "000905", "index", "中证500"),
    "中证1000": Instrument("SH", "000852", "index", "中证1000"),
    "深证成指": Instrument("SZ", "399001", "index", "深证成指"), "深证成份指数": Instrument("SZ", "399001", "index", "深证成指"),
    "创业板指": Instrument("SZ", "399006", "index", "创业板指"), "创业板指数": Instrument("SZ", "399006", "index", "创业板指"),
    "恒生指数": HSI, "恒指": HSI,
    "恒生科技指数": Instrument("HKI", "HSTECH", "index", "恒生科技指数"),
    "恒生科技": Instrument("HKI", "HSTECH", "index", "恒生科技指数"),
}

# the names the radar knows each of those indices by (its code written beside another name is a contradiction)
_INDEX_ALIASES: dict[str, tuple[str, ...]] = {
    index.key: (index.name, *(alias for alias, same in INDEX_NAMES.items() if same.key == index.key))
    for index in INDEX_NAMES.values()}

# Shenwan (申万 2021) industry indices: (code, name, words articles use for the industry). Level 1, then the
# level-2 industries articles name most; the longest word found in a target decides.
SECTORS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("801010", "农林牧渔", ("农林牧渔", "农业", "养殖", "生猪", "种业", "渔业")),
    ("801030", "基础化工", ("基础化工", "化工", "化学品")),
    ("801040", "钢铁", ("钢铁", "钢材", "特钢")),
    ("801050", "有色金属", ("有色金属", "有色", "铜矿", "铝业", "黄金股", "稀土", "锂矿")),
    ("801080", "电子", ("电子", "消费电子", "面板", "元器件", "PCB")),
    ("801081", "半导体", ("半导体", "芯片", "集成电路", "晶圆", "刻蚀", "光刻")),
    ("801880", "汽车", ("汽车", "整车", "新能源车", "新能源汽车", "汽车零部件")),
    ("801110", "家用电器", ("家用电器", "家电", "白电")),
    ("801120", "食品饮料", ("食品饮料", "食品", "饮料", "乳业", "啤酒", "调味品")),
    ("801125", "白酒Ⅱ", ("白酒",)),
    ("801130", "纺织服饰", ("纺织服饰", "纺织", "服装", "服饰")),
    ("801140", "轻工制造", ("轻工制造", "轻工", "造纸", "家居")),
    ("801150", "医药生物", ("医药生物", "医药", "生物医药", "医疗", "创新药", "仿制药", "CXO")),
    ("801151", "化学制药", ("化学制药",)),
    ("801156", "医疗服务", ("医疗服务",)),
    ("801160", "公用事业", ("公用事业", "电力", "燃气", "水务", "核电", "火电", "水电")),
    ("801170", "交通运输", ("交通运输", "航运", "集运", "集装箱航运", "港口", "物流", "快递", "航空", "铁路")),
    ("801180", "房地产", ("房地产", "地产", "楼市")),
    ("801200", "商贸零售", ("商贸零售", "零售", "电商", "免税")),
    ("801210", "社会服务", ("社会服务", "旅游", "酒店", "餐饮", "教育")),
    ("801230", "综合", ("综合",)),
    ("801710", "建筑材料", ("建筑材料", "建材", "水泥", "玻璃")),
    ("801720", "建筑装饰", ("建筑装饰", "建筑", "基建")),
    ("801730", "电力设备", ("电力设备", "电网设备", "风电", "储能", "锂电", "锂电池", "新能源")),
    ("801735", "光伏设备", ("光伏", "光伏设备", "硅料", "组件")),
    ("801737", "电池", ("电池", "动力电池", "电芯")),
    ("801740", "国防军工", ("国防军工", "军工", "航天", "航空装备")),
    ("801750", "计算机", ("计算机", "软件", "信创", "云计算", "人工智能", "AI应用")),
    ("801760", "传媒", ("传媒", "游戏", "影视", "广告", "出版")),
    ("801770", "通信", ("通信", "通信设备", "光模块", "运营商", "5G")),
    ("801780", "银行", ("银行",)),
    ("801790", "非银金融", ("非银金融", "券商", "证券", "保险", "信托")),
    ("801890", "机械设备", ("机械设备", "机械", "工程机械", "机床", "工业母机")),
    ("801950", "煤炭", ("煤炭", "煤矿", "焦煤", "动力煤")),
    ("801960", "石油石化", ("石油石化", "石油", "石化", "油气", "炼化")),
    ("801970", "环保", ("环保", "固废", "污水处理")),
    ("801980", "美容护理", ("美容护理", "美妆", "化妆品", "医美")),
)
# opportunity types whose targets are never a security the radar can follow
UNTRACKED_TYPES = {"commodity": "商品", "macro": "宏观", "bond": "债券", "fx": "外汇", "crypto": "加密资产"}

_WIDTH = str.maketrans({"（": "(", "）": ")", "．": ".", "　": " "})
_CODE_IN = re.compile(r"(?<![0-9A-Za-z])(?:(SH|SZ|BJ|SS)\s?)?([0-9]{6})(?:\.(SH|SZ|BJ|SS))?(?![0-9A-Za-z])", re.I)
_HK_IN = re.compile(r"(?<![0-9A-Za-z])(?:HK\s?([0-9]{4,5})|([0-9]{4,5})\.HK)(?![0-9A-Za-z])", re.I)
_BARE_HK = re.compile(r"^0[0-9]{4}$")
_BRACKETED_HK = re.compile(r"\((0[0-9]{3,4}|[0-9]{5})\)")  # 腾讯控股（00700）: A-share codes have six digits
_CODE_TOKENS = re.compile(r"(?:SH|SZ|BJ|SS|HK)?\s?[0-9]{4,6}(?:\.(?:SH|SZ|BJ|SS|HK))?", re.I)
_NOT_NAME = re.compile(r"[\s()\[\]【】,，:：;；、/.*-]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ST_MARK = re.compile(r"^S?\*?ST")


def normalise(text: str) -> str:
    """Full-width letters and digits made half-width, brackets unified, blanks trimmed, letters upper-case."""
    return unicodedata.normalize("NFKC", str(text)).translate(_WIDTH).strip().upper()


def a_share(code: str, exchange: str | None) -> Instrument | None:
    """The A-share instrument of a six-digit code, its exchange given or told by its first digits."""
    exchange = {"SS": "SH"}.get(exchange or "", exchange)
    if exchange == "SH" and code.startswith("000"):
        return Instrument("SH", code, "index")
    guess = (
        ("SH", "stock") if code[0] == "6" else
        ("SH", "etf") if code[:2] in ("51", "56", "58", "50") else
        ("SZ", "index") if code.startswith("399") else
        ("SZ", "etf") if code[:2] in ("15", "16") else
        ("SZ", "stock") if code[0] in "03" else
        ("BJ", "stock") if code[0] in "48" or code.startswith("92") else
        ("SW", "index") if code.startswith("801") else None
    )
    if guess is None or (exchange and guess[0] != exchange):
        return None  # a code its exchange does not list (600519.SZ): not a guess worth measuring
    return Instrument(guess[0], code, guess[1])


def from_key(key: str, name: str = "") -> Instrument | None:
    """The instrument a stored key (``SH:600519``) names."""
    market, _, code = key.partition(":")
    if market in ("SH", "SZ", "BJ"):
        found = a_share(code, market) if len(code) == 6 and code.isdigit() else None
        return Instrument(found.market, found.code, found.kind, name) if found else None
    if market in ("HK", "HKI", "SW", "CSI") and code:
        return Instrument(market, code, "stock" if market == "HK" else "index", name)
    return None


def parse_code(text: str) -> Instrument | None:
    """The instrument a code names, also a code written inside a name; None when the text holds none."""
    norm = normalise(text)
    hk = _HK_IN.search(norm)
    if hk:
        return Instrument("HK", (hk.group(1) or hk.group(2)).zfill(5), "stock")
    if _BARE_HK.match(norm):
        return Instrument("HK", norm, "stock")
    bracketed = _BRACKETED_HK.search(norm)
    if bracketed and not _CODE_IN.search(norm):
        return Instrument("HK", bracketed.group(1).zfill(5), "stock")
    found = [a_share(m.group(2), (m.group(1) or m.group(3) or "").upper() or None) for m in _CODE_IN.finditer(norm)]
    found = [f for f in found if f is not None]
    return found[0] if len({f.key for f in found}) == 1 else None


def sector_of(text: str) -> tuple[Instrument | None, str]:
    """The Shenwan index of a sector word (the longest word of SECTORS the target contains), or (None, why)."""
    norm = normalise(text)
    best: list[tuple[int, str, str]] = []
    for code, name, words in SECTORS:
        for word in words:
            if normalise(word) in norm:
                best.append((len(word), code, name))
    if not best:
        return None, f"「{text}」没有对应的行业指数"
    top = max(b[0] for b in best)
    codes = {(c, n) for length, c, n in best if length == top}
    if len(codes) > 1:
        return None, f"「{text}」可对应多个行业指数：{'、'.join(sorted(n for _, n in codes))}"
    code, name = codes.pop()
    return Instrument("SW", code, "index", f"申万{name}"), ""


# what a sector is written with beyond its word (光伏产业链, 银行板块, 半导体设备): nothing a company adds to its name
_SECTOR_SUFFIXES = ("产业链", "板块", "行业", "产业", "概念股", "概念", "设备", "龙头", "股")


def _sector_words() -> dict[str, tuple[str, str] | None]:
    """Every word of SECTORS (and each industry's name), normalised, with its index; None for a word two
    industries share."""
    words: dict[str, tuple[str, str] | None] = {}
    for code, name, aliases in SECTORS:
        for word in {name, *aliases}:
            key = normalise(word)
            words[key] = (code, name) if words.get(key, (code, name)) == (code, name) else None
    return words


_SECTOR_WORDS = _sector_words()


def named_sector(text: str) -> Instrument | None:
    """The Shenwan index of a target that is a sector and nothing else: the whole target is a word of SECTORS,
    maybe with a generic suffix (动力电池, 白酒, 半导体设备, 银行板块). A company whose name holds a sector
    word (平安银行, 长江电力, 中信证券) is a company, not a sector; a code or an index name is neither."""
    norm = normalise(text)
    while norm:
        found = _SECTOR_WORDS.get(norm)
        if found is not None:
            return Instrument("SW", found[0], "index", f"申万{found[1]}")
        suffix = next((s for s in _SECTOR_SUFFIXES if norm.endswith(s) and len(norm) > len(s)), None)
        if suffix is None:
            return None
        norm = norm[: -len(suffix)]
    return None


@dataclass(frozen=True)
class Resolution:
    """What a pick measures: the instrument and its benchmark, or why nothing can be measured."""

    instrument: Instrument | None
    benchmark: Instrument | None
    target: str
    direction: str
    opp_type: str
    reason: str = ""
    needs_names: bool = False  # a company name waits for the list of listed names


def benchmark_for(instrument: Instrument, sector: Instrument | None) -> Instrument:
    """CSI 300 for the A-share market, the Hang Seng for Hong Kong; for an A-share stock whose opportunity also
    names a sector with an index (another target that is a sector and nothing else: named_sector), that
    sector's index. Like against like: a backward-adjusted stock or ETF is
    measured against the CSI 300's total-return series, an index against the price index (market/basis.py)."""
    if instrument.calendar == HK:
        return HSI
    if instrument.kind == "stock" and sector is not None:
        return sector
    return CSI300 if instrument.kind == "index" else CSI300TR


def by_name(target: str, names: Mapping[str, list[Instrument]] | None) -> tuple[Instrument | None, str]:
    """A company name resolved through the listed names: the exact name, else the only listing containing it."""
    norm = normalise(target)
    if names is None:
        return None, ""
    exact = names.get(norm, [])
    if len(exact) == 1:
        return exact[0], ""
    if len(exact) > 1:
        return None, f"「{target}」对应多个代码：{'、'.join(sorted(i.key for i in exact))}，不作测量"
    if len(norm) < 3:
        return None, f"「{target}」不是代码，也不是完整的上市公司名称"
    containing = {i.key: i for name, items in names.items() if norm in name for i in items}
    if len(containing) == 1:
        return next(iter(containing.values())), ""
    if len(containing) > 1:
        shown = sorted(containing)[:4]
        return None, f"「{target}」对应多个代码：{'、'.join(shown)}{' 等' if len(containing) > 4 else ''}，不作测量"
    return None, f"「{target}」不是代码，也没有同名的上市公司"


class Names(dict[str, list[Instrument]]):
    """The listed companies by normalised name (what a company name resolves through), and ``by_key``: every
    listed name by instrument key, ETFs too (what a code's written name is checked against, what tells an ST
    stock or a ChiNext ETF)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_key: dict[str, str] = {}


def name_index(listings: Iterable[tuple[str, str]]) -> Names:
    """The listed names (Names) from (instrument key, name) rows of the listings cache. An ETF's name is kept by
    its key only: a company named in a pick is never resolved to a fund."""
    index = Names()
    for key, name in listings:
        inst = from_key(key, name)
        if inst is None:
            continue
        index.by_key[key] = name
        if inst.kind != "etf":
            index.setdefault(normalise(name), []).append(inst)
    return index


def name_beside_code(text: str) -> str:
    """The words written beside a code (``上证指数（000001）`` → ``上证指数``); '' when only a code is written."""
    return _NOT_NAME.sub("", _CODE_TOKENS.sub("", normalise(text)))


def _core(name: str) -> str:
    return _ST_MARK.sub("", _NOT_NAME.sub("", normalise(name)))


def names_agree(written: str, listed: str) -> bool:
    """Whether a written name can be the listed one: one contains the other once the ST marks are set aside
    (茅台 and 贵州茅台, 华微电子 and *ST华微)."""
    a, b = _core(written), _core(listed)
    return bool(a) and bool(b) and (a in b or b in a)


def code_with_name(target: str, code: Instrument, names: Mapping[str, list[Instrument]] | None
                   ) -> tuple[Instrument | None, str, bool]:
    """The instrument a code names once the name written beside it agrees: (instrument, why not, waits for the
    listed names). An index name whose code matches gives the index (``沪深300（000300）``, never the Shenzhen
    stock 000300); a name that contradicts the code's listed name, or the name the radar knows an index code by
    (平安银行（SH000001）: 上证指数), gives nothing, with the reason; a name in no script the listings use (Latin
    letters only), or a code neither the listings nor INDEX_NAMES hold, cannot contradict."""
    written = name_beside_code(target)
    if not _CJK.search(written):
        return code, "", False
    index = INDEX_NAMES.get(written)
    if index is not None:
        if code.code == index.code:
            return index, "", False
        return None, f"「{target}」：{index.name}的代码是 {index.code}，与所写代码不符，不作测量", False
    if code.kind == "index":
        known = _INDEX_ALIASES.get(code.key)
        if known and not any(names_agree(written, alias) for alias in known):
            return None, f"「{target}」：代码 {code.code} 是「{known[0]}」，与所写名称不符，不作测量", False
        return code, "", False
    if names is None:
        return None, "", True
    listed = getattr(names, "by_key", {}).get(code.key)
    if listed is None or names_agree(written, listed):
        return code, "", False
    return None, f"「{target}」：代码 {code.code} 是「{listed}」，与所写名称不符，不作测量", False


def _target(target: str, opp_type: str, names: Mapping[str, list[Instrument]] | None
            ) -> tuple[Instrument | None, str, bool]:
    """What one target names: (instrument, why not, waits for the listed names)."""
    code = parse_code(target)
    if code is not None:
        return code_with_name(target, code, names)
    found = INDEX_NAMES.get(normalise(target))
    if found is not None:
        return found, "", False
    if opp_type == "sector":
        found, why = sector_of(target)
        return found, why or f"「{target}」没有对应的行业指数", False
    if names is None:
        return None, "", True
    found, why = by_name(target, names)
    return found, why, False


def resolve(opportunities: list[dict], names: Mapping[str, list[Instrument]] | None) -> Resolution:
    """The first target (opportunities in the model's order, targets in order) that names one instrument.

    ``names``: the listed names (name_index); None when they could not be had: a company name then waits
    (``needs_names``) instead of being declared unmeasurable."""
    reasons: list[str] = []
    first_direction, first_type = "watch", "other"
    waiting = False
    for position, opp in enumerate(o for o in opportunities if isinstance(o, dict)):
        direction = str(opp.get("direction") or "watch")
        opp_type = str(opp.get("type") or "other")
        if position == 0:
            first_direction, first_type = direction, opp_type
        targets = [t for t in opp.get("targets") or [] if isinstance(t, str) and t.strip()]
        if opp_type in UNTRACKED_TYPES:
            reasons.append(f"{UNTRACKED_TYPES[opp_type]}类机会没有可跟踪的证券")
            continue
        for target in targets:
            found, why, wait = _target(target, opp_type, names)
            waiting = waiting or wait
            if found is None:
                if not wait:
                    reasons.append(why or f"「{target}」无法对应到证券")
                continue
            # the sector comes from another target: a company's own name (平安银行) never sets it
            sector = next((s for s in map(named_sector, (t for t in targets if t != target)) if s), None)
            bench = benchmark_for(found, sector if found.kind == "stock" and found.market != "SW" else None)
            return Resolution(found, bench, target, direction, opp_type)
        if not targets:
            reasons.append("机会没有列出标的")
    if waiting:
        return Resolution(None, None, "", first_direction, first_type, "上市公司名称表暂不可得，次日重试", needs_names=True)
    reason = "；".join(dict.fromkeys(reasons)) or "分析没有列出投资机会"
    return Resolution(None, None, "", first_direction, first_type, reason)


STAR_ETFS = ("588", "589")  # Shanghai's codes for ETFs of STAR-market stocks
GROWTH_BOARD_WORDS = ("创业板", "创业", "双创", "科创")  # an ETF of ChiNext or STAR stocks only: ±20 %
_NOT_A_NAME = re.compile(r"[0-9\s().:·_-]|SH|SZ|ETF")
_ST = re.compile(r"(?<![A-Z])S?\*?ST(?![A-Z])")

# The daily price limits are the exchanges' dated rules, not constants:
# - ChiNext: ±10 % (ST ±5 %) until its registration reform, ±20 % for every ChiNext stock from 2020-08-24;
# - STAR (688/689): ±20 % since it opened (2019-07-22); Beijing ±30 %;
# - main-board risk-warning (ST, *ST) stocks: ±5 %. The exchanges proposed on 2025-06-27 (征求意见稿, "关于
#   调整主板风险警示股票价格涨跌幅限制比例及有关事项的通知") to make it ±10 %, like the rest of the main boards;
#   ST_MAIN_BOARD_TEN_FROM is the day the final notice puts it in force. Until that day is entered here, a
#   main-board ST stock after the proposal has no limit said (an open at it is not judged), rather than a guess.
CHINEXT_TWENTY_FROM = date(2020, 8, 24)
ST_MAIN_BOARD_PROPOSAL = date(2025, 6, 27)
ST_MAIN_BOARD_TEN_FROM: date | None = None


def is_st(*names: str) -> bool:
    """Whether a name marks a risk-warning stock (ST, *ST, SST, S*ST)."""
    return any(_ST.search(normalise(n)) for n in names if n)


def _st_main_board(day: date | None) -> float | None:
    """A main-board ST stock's limit on ``day`` (None: the rules in force now)."""
    if day is not None and day < ST_MAIN_BOARD_PROPOSAL:
        return 0.05
    if ST_MAIN_BOARD_TEN_FROM is None:
        return None  # proposed, its start not entered: not judged
    return 0.10 if day is None or day >= ST_MAIN_BOARD_TEN_FROM else 0.05


def price_limit(instrument: Instrument, named: str = "", day: date | None = None) -> float | None:
    """The daily price limit (a fraction) of an A-share instrument on ``day`` (None: the rules in force now),
    None where there is none (indices, HK) or where it is not known. ``named``: what the pick wrote (its
    target); the instrument's name should be its listed name (ST marks change): an ST mark in either counts.
    An ETF has ±10 %, ±20 % when it holds ChiNext or STAR stocks only: Shanghai's 588/589 codes, or a name
    saying 创业板, 双创 or 科创; a Shenzhen ETF whose name is nowhere to be had (159915 is ChiNext's, 159919
    the CSI 300's) has no limit said. The limit is only used to note a price at it."""
    if instrument.market not in ("SH", "SZ", "BJ") or instrument.kind == "index":
        return None
    if instrument.market == "BJ":
        return 0.30
    if instrument.kind == "etf":
        text = normalise(f"{instrument.name} {named}")
        if instrument.code.startswith(STAR_ETFS) or any(w in text for w in GROWTH_BOARD_WORDS):
            return 0.20
        return None if instrument.market == "SZ" and not _NOT_A_NAME.sub("", text) else 0.10
    st = is_st(instrument.name, named)
    if instrument.code.startswith(("688", "689")):
        return 0.20
    if instrument.code.startswith(("300", "301")):
        return 0.20 if day is None or day >= CHINEXT_TWENTY_FROM else 0.05 if st else 0.10
    return _st_main_board(day) if st else 0.10
