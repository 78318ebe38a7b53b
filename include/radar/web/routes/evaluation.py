"""The evaluations' page (评估, ``/evaluation``, ``/evaluation/{id}``): the shadow evaluations of candidate models
and, for one, its summary beside the current set-up (include/radar/evaluation/summary.py). Operator material: it
shows what models cost and how the reader's own verdicts line up, so a pushed link or its read session never opens
it — an Airflow login with read permission on the DAG does."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from include.radar import store
from include.radar.evaluation import summary as evaluation_report
from include.radar.web.auth import PageError, Reader, ReaderDep
from include.radar.web.pages import get_pages, page_links
from include.radar.web.resources import get_resources
from include.radar.web.views import evaluation as views

_ID = re.compile(r"[0-9]{1,19}")


async def require_operator(reader: ReaderDep) -> Reader:
    """An Airflow user who may read the DAG; never a link or the session it opened."""
    if reader.signed:
        raise PageError(401, "请登录 Airflow 查看评估", "模型评估是运维资料（费用、你的反馈与模型的对照），推送链接和由它打开的"
                        "浏览都不能查看。登录 Airflow 后即可查看。", login=True)
    return reader


OperatorDep = Annotated[Reader, Depends(require_operator)]
router = APIRouter()


@router.get("/evaluation", response_class=HTMLResponse)
def evaluations(request: Request, reader: OperatorDep) -> HTMLResponse:
    resources = get_resources(request)
    with resources.connect() as conn:
        rows = store.evaluations.listing(conn)
    return get_pages(request).render(request, "evaluation.html", settings=resources.settings(), reader=reader,
                                     links=page_links(request), listed=[views.listed(r) for r in rows], summary=None)


@router.get("/evaluation/{evaluation_id}", response_class=HTMLResponse)
def one(request: Request, evaluation_id: str, reader: OperatorDep) -> HTMLResponse:
    if not _ID.fullmatch(evaluation_id) or not 0 < int(evaluation_id) < 2**63:
        raise PageError(404, "找不到这次评估", "评估地址应为 /evaluation/ 加正整数编号，例如 /evaluation/3。")
    resources = get_resources(request)
    with resources.connect() as conn:
        summary = evaluation_report.load(conn, int(evaluation_id), now=request.app.state.radar.clock.now(),
                                         settings=resources.settings())
    if summary is None:
        raise PageError(404, "找不到这次评估", f"没有编号为 {int(evaluation_id)} 的评估。")
    e = summary.evaluation
    threshold = resources.settings().push_score_threshold
    verdict = views.verdict(summary)
    current = summary.glance.current.model if summary.glance else "当前设置"
    chart = views.scatter(summary.points, title="两种设置的评分对照", x_label=f"当前（{current}）的评分",
                          y_label=f"候选（{e['model']}）的评分",
                          threshold=threshold,
                          desc=f"横轴为当前 {current} 的评分，纵轴为候选 {e['model']} 的评分，共 {len(summary.points)} 篇；"
                               f"虚线为评分相同，细线为推送门槛 {threshold}")
    return get_pages(request).render(
        request, "evaluation.html", settings=resources.settings(), reader=reader, links=page_links(request),
        listed=None, summary=summary, row=views.listed(e), verdict=verdict, chart=chart,
        costs=views.cost_rows(summary, e["currency"]), market=views.market_rows(summary),
        disagreements=views.disagreements(summary), current_estimated=summary.current_estimated,
        horizon=summary.market.horizon if summary.market else None, pct=views.pct, num=views.num, auc=views.auc_text,
    )
