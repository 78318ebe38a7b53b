"""
### Opportunity Radar: a shadow evaluation of a candidate model (triggered by hand)

Runs a candidate set-up (model, thinking, reasoning effort, prompt version, its own connection) over a bounded
sample of the reader's analysed articles and compares it with the current one: agreement, the reader's 👍/👎, the
market, cost and time. Its answers are stored apart and never pushed, shown as analyses, or counted in the record
or the rank; its spend is in the ledger under a cap of its own (refused up front when the estimate is over it),
never from the slots' daily budget. Tick 只估算 for the estimate alone. Never scheduled, never on a slot's path.
Read the result on the radar's 评估 page or with `python -m include.radar.cli evaluation ID`; see
docs/evaluation.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import Param, dag, get_current_context, task

from include.radar.core.slots import SHANGHAI
from include.radar.seam.support import run_step, task_try

EVALUATE_TIMEOUT = timedelta(hours=2)
MARGIN = timedelta(minutes=2)


@dag(
    dag_id="opportunity_radar_evaluation",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=SHANGHAI),
    catchup=False,
    max_active_runs=1,
    tags=["radar", "evaluation"],
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "model": Param("deepseek-flash", type="string", minLength=1, maxLength=100, title="候选模型 / Model"),
        "thinking": Param(True, type="boolean", title="思考模式 / Thinking"),
        "reasoning_effort": Param("high", enum=["low", "medium", "high", "max"], title="推理强度 / Reasoning effort"),
        "prompt_version": Param("v3", type="string", pattern=r"^v[0-9]{1,3}$", title="提示词版本 / Prompt version"),
        "connection": Param(None, type=["null", "string"], title="连接 / Connection",
                            description="可不填：候选模型自己的 OpenAI 兼容连接，名称以 radar_llm_ 开头（https，本机回环地址除外）；"
                                        "留空用 DeepSeek 的连接"),
        "prices": Param(None, type=["null", "string"], title="价格 / Prices",
                        description='可不填：候选模型的非高峰价格（每百万 tokens，deepseek_currency），JSON 如 '
                                    '{"cache_hit": 0.003, "cache_miss": 0.15, "output": 0.6}；没有公开价格的模型必须填写'),
        "days": Param(14, type="integer", minimum=1, maximum=366, title="最近天数 / Days"),
        "size": Param(50, type="integer", minimum=1, maximum=200, title="文章数上限 / Sample size"),
        "only": Param("all", enum=["all", "feedback", "outcomes"], title="只评估 / Only",
                      values_display={"all": "全部已分析文章", "feedback": "有你的反馈的", "outcomes": "有市场结果的"}),
        "cap": Param(1.0, type="number", minimum=0, maximum=350, title="费用上限 / Cap",
                     description="本次评估最多花费（deepseek_currency，最多 $50 或 ¥350）；估算超出上限时不调用、直接拒绝；"
                                 "不占用每日预算"),
        "dry_run": Param(False, type="boolean", title="只估算 / Dry run",
                         description="只抽样并估算费用，不记录、不调用"),
        "resume": Param(None, type=["null", "integer"], minimum=1, title="续跑评估编号 / Resume",
                        description="可不填：继续一次已暂停、失败或被拒绝的评估（已回答的文章不会再付费）；填写时可同时提高上限"),
    },
    doc_md=__doc__,
)
def opportunity_radar_evaluation():
    @task(pool="radar_llm", execution_timeout=EVALUATE_TIMEOUT)
    def evaluate() -> dict:
        context = get_current_context()
        return run_step("evaluate", dict(context["params"]), attempt=task_try(), run_id=context["run_id"],
                        seconds=(EVALUATE_TIMEOUT - MARGIN).total_seconds())

    evaluate()


opportunity_radar_evaluation()
