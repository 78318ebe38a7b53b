"""The score rubric of the analysis prompt, tied to the push threshold: the bands and what
each means, written once; the analysis page names the band of a score the same way."""

from __future__ import annotations

# the score bands of the rubric, each with an example; the push threshold is where "worth pushing" starts
BAND_TOP = "明确标的 + 已发生或确定将发生的催化剂 + 文中有具体数据支撑，例如“公司公告中标 30 亿元订单，占去年营收 40%”"
BAND_PUSH = "值得读者今天关注的机会：有具体标的或板块、有催化剂、证据来自原文，例如“行业集采量同比翻倍，龙头份额第一”"
BAND_WATCH = "有参考价值的资讯或观察，但标的、催化剂或证据不足，例如“行业景气有望回升，建议关注”"
BAND_NONE = "与投资无关、纯情绪、广告或无法判断，例如“节日祝福”“课程推广”"


def bands(threshold: int) -> list[tuple[int, int, str]]:
    """The score bands (low, high, meaning) of the rubric for this push threshold, best first."""
    bands: list[tuple[int, int, str]] = []
    if threshold <= 89:
        bands += [(90, 100, BAND_TOP), (threshold, 89, BAND_PUSH)]
    else:
        bands += [(threshold, 100, BAND_TOP)]
    if threshold > 30:
        bands += [(30, threshold - 1, BAND_WATCH), (0, 29, BAND_NONE)]
    elif threshold > 0:
        bands += [(0, threshold - 1, BAND_NONE)]
    return bands


def band_of(score: int, threshold: int) -> tuple[int, int, str]:
    """The rubric band a score falls in."""
    return next(b for b in bands(threshold) if b[0] <= score <= b[1])


def rubric(threshold: int) -> str:
    """The score bands of the analysis prompt for this push threshold, written once for every article."""
    return "\n".join(f"   - {lo}–{hi}：{text}。" for lo, hi, text in bands(threshold))
