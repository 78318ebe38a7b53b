"""The Chinese words the pages and the pushes use for what the model answers: an opportunity's type and
direction (schemas.py's literals). One table, so a page and a push never name the same call differently."""

from __future__ import annotations

TYPES = {
    "stock": "个股",
    "sector": "行业",
    "fund": "基金",
    "commodity": "商品",
    "macro": "宏观",
    "bond": "债券",
    "fx": "外汇",
    "crypto": "加密资产",
    "other": "其他",
    "none": "无机会",
}
DIRECTIONS = {"bullish": "看多", "bearish": "看空", "neutral": "中性", "watch": "观察"}


def type_label(value: str | None) -> str:
    return TYPES.get(value or "", value or "—")


def direction_label(value: str | None) -> str:
    return DIRECTIONS.get(value or "", value or "—")
