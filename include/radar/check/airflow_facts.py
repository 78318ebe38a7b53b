"""The seam to Airflow for ``cli check``: what Airflow's own metadata says of the radar (the pool, the DAG,
its file's import errors) and whether the DAG file parses here. Airflow is imported inside each function, only
when asked (check/platform.py asks only where Airflow is configured: importing it elsewhere would create
~/airflow). The check's lines are check/platform.py's; this module only reads.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from include.radar import DAG_ID

POOL = "radar_llm"
DAG_FILE = "opportunity_radar.py"


@dataclass(frozen=True)
class AirflowFacts:
    """What Airflow's metadata database says of the radar."""

    pool_slots: int | None  # None: no pool radar_llm
    dag_known: bool
    paused: bool = False
    stale: bool = False
    import_error: str | None = None  # the first line of the DAG file's import error, when it has one


def load_models() -> None:
    """Import Airflow's models (in the calling thread): abandoned mid-import in a bounded thread on a slow host
    (20 s and more in a busy container), the import held their locks, and the next import of them hung for good."""
    from airflow.models import import_all_models

    import_all_models()


def read_airflow() -> AirflowFacts:
    """Ask Airflow's own metadata database (read only) about the pool, the DAG and its file's import errors."""
    from airflow.models.dag import DagModel
    from airflow.models.errors import ParseImportError
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        pool = session.scalar(select(Pool).where(Pool.pool == POOL))
        dag = session.get(DagModel, DAG_ID)
        error = session.scalar(select(ParseImportError).where(ParseImportError.filename.like(f"%{DAG_FILE}")))
        return AirflowFacts(
            pool_slots=pool.slots if pool is not None else None, dag_known=dag is not None,
            paused=bool(dag and dag.is_paused), stale=bool(dag and dag.is_stale),
            import_error=(error.stacktrace or "import error").strip().splitlines()[-1][:300] if error else None)


def dag_folder() -> Path:
    """Where this Airflow reads the radar's DAG file: a local DAG bundle that holds it, else the dags folder."""
    from airflow.configuration import conf

    try:
        bundles = json.loads(conf.get("dag_processor", "dag_bundle_config_list", fallback="[]") or "[]")
    except ValueError:
        bundles = []
    for bundle in bundles if isinstance(bundles, list) else []:
        path = (bundle.get("kwargs") or {}).get("path") if isinstance(bundle, dict) else None
        if isinstance(path, str) and (Path(path) / DAG_FILE).is_file():
            return Path(path)
    return Path(conf.get("core", "dags_folder"))


def parses_here() -> str | None:
    """Parse the DAG file in this process (nothing is written): its import error, or None."""
    from airflow.dag_processing.dagbag import DagBag

    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines are not the check's
        bag = DagBag(dag_folder=str(dag_folder()))
    if bag.import_errors:
        return str(next(iter(bag.import_errors.values()))).strip().splitlines()[-1][:300]
    return None if DAG_ID in bag.dags else f"DAG 文件里没有 DAG {DAG_ID}"
