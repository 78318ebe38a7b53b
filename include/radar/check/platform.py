"""The check's lines for what the radar runs on: its PostgreSQL (reachable, migrated, the pages' login kept
read-mostly) and Airflow's metadata (the pool, the DAG parsed, paused or not), read through the seam
(airflow_metadata.py): nothing here imports Airflow."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import psycopg

from include.radar import DAG_ID
from include.radar.check import Line, Options, bounded, fail, ok, reason, warn
from include.radar.check.airflow_facts import DAG_FILE, POOL, AirflowFacts, load_models, parses_here, read_airflow
from include.radar.core import db
from include.radar.core.connection_info import airflow_here
from include.radar.core.settings import Settings, deployment
from include.radar.operations import roles

DB = "雷达数据库"
AIRFLOW = "Airflow"
MIGRATE = "python -m include.radar.cli migrate（docker compose 的 airflow-init 每次启动都会运行）"
PROVISION = ("数据库（或它的登录）还没有建：以 PostgreSQL 超级用户运行 python -m include.radar.cli provision"
             "（RADAR_ADMIN_DATABASE_URL 是超级用户的 URL；docker compose 的 airflow-init 会做），再 migrate；"
             "或改正 RADAR_DATABASE_URL / radar_db 连接")


def database_lines(url: str, settings: Settings, options: Options) -> tuple[list[Line], bool]:
    """The radar database's lines, and whether the other checks may read and write it: reachable, and holding
    the radar's tables (a database never migrated has none: its line says so, and nothing else reads it)."""
    try:
        with db.connect(url, statement_timeout_s=options.timeout, lock_timeout_s=options.timeout) as conn:
            version = conn.execute("SHOW server_version").fetchone()["server_version"]
            lines = [ok(DB, "可连接", f"PostgreSQL {version.split()[0]}，{db.redact(url)}"), _schema(conn)]
            usable = conn.execute("SELECT to_regclass('service_state') IS NOT NULL AS e").fetchone()["e"]
    except db.DatabaseMissing as exc:
        return [fail(DB, "可连接", reason(exc.reason), PROVISION)], False
    except (db.DatabaseUnavailable, psycopg.Error) as exc:
        return [fail(DB, "可连接", reason(exc), "启动 PostgreSQL，或改正 RADAR_DATABASE_URL / radar_db 连接")], False
    lines.append(pages_line(deployment("RADAR_PAGES_DATABASE_URL"), url, settings, options))
    return lines, usable


def _schema(conn: psycopg.Connection) -> Line:
    files = {p.name: hashlib.sha256(p.read_text(encoding="utf-8").encode()).hexdigest() for p in db.migration_files()}
    exists = conn.execute("SELECT to_regclass('schema_migration') IS NOT NULL AS e").fetchone()["e"]
    done = {r["version"]: r["checksum"] for r in conn.execute("SELECT version, checksum FROM schema_migration")} \
        if exists else {}
    pending = sorted(set(files) - set(done))
    changed = sorted(v for v in set(files) & set(done) if files[v] != done[v])
    unknown = sorted(set(done) - set(files))
    if changed:
        return fail(DB, "表结构", f"已应用的迁移文件之后被改过：{', '.join(changed)}",
                    "恢复应用它们的那个版本的迁移文件（迁移只能追加）")
    if unknown:
        return fail(DB, "表结构", f"数据库里有这份代码不认识的迁移：{', '.join(unknown)}",
                    "部署写下它们的那个版本（这份代码比数据库旧）")
    if pending:
        return fail(DB, "表结构", f"{len(pending)} 个迁移未应用：{', '.join(pending)}", f"运行 {MIGRATE}")
    return ok(DB, "表结构", f"已迁移：{len(done)} 个迁移全部应用")


def pages_line(pages: str | None, owner_url: str, settings: Settings, options: Options) -> Line:
    """The pages' login: separate from the owner, not a superuser, writing only the reader's own tables, and
    able to read the check's result (row security hides only the WeRSS token from it)."""
    if not pages:
        text = "没有设置 RADAR_PAGES_DATABASE_URL：报告页面用雷达自己的登录"
        if settings.demo_mode:
            return ok(DB, "页面登录", text + "（演示与 make run 只有一个登录）")
        return warn(DB, "页面登录", text, "给 RADAR_PAGES_DATABASE_URL 一个单独的登录，并运行 cli provision 与 "
                    "grant-pages（docker compose 两步都做）")
    try:
        with db.connect(pages, statement_timeout_s=options.timeout, lock_timeout_s=options.timeout) as conn:
            facts = _pages_facts(conn)
    except (db.DatabaseUnavailable, psycopg.Error) as exc:
        return fail(DB, "页面登录", reason(exc), "改正 RADAR_PAGES_DATABASE_URL，再运行 cli provision 与 grant-pages")
    owner = psycopg.conninfo.conninfo_to_dict(owner_url).get("user")
    grant = "以雷达数据库的属主运行 python -m include.radar.cli grant-pages（docker compose：airflow-init）"
    if facts["user"] == owner or facts["superuser"]:
        return fail(DB, "页面登录", f"页面以 {facts['user']!r} 登录，"
                    + ("是超级用户" if facts["superuser"] else "是雷达数据库的属主"),
                    "给 RADAR_PAGES_DATABASE_URL 一个单独的登录（cli provision）")
    if facts["writes"]:
        return fail(DB, "页面登录", f"{facts['user']} 能写 {', '.join(facts['writes'][:5])}", grant)
    if not facts["reads"]:
        return fail(DB, "页面登录", f"{facts['user']} 读不了 service_state（健康面板）", grant)
    return ok(DB, "页面登录", f"{facts['user']}：能读全部，只能写 {', '.join(roles.PAGES_WRITE_TABLES)}；"
              "WeRSS 令牌那一行对它不可见")


def _pages_facts(conn: psycopg.Connection) -> dict[str, Any]:
    me = conn.execute("SELECT current_user AS u, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS s"
                      ).fetchone()
    writes = [r["relname"] for r in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace"
        " AND NOT (c.relname = ANY(%s)) AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')"
        " ORDER BY c.relname", (list(roles.PAGES_WRITE_TABLES),))]
    reads = conn.execute("SELECT has_table_privilege('service_state', 'SELECT') AS r").fetchone()["r"]
    return {"user": me["u"], "superuser": bool(me["s"]), "writes": writes, "reads": bool(reads)}


# ---------------------------------------------------------------------------------------------- Airflow


def airflow_lines(settings: Settings, options: Options, *, facts: Callable[[], AirflowFacts] = read_airflow,
                  parse: Callable[[], str | None] = parses_here) -> list[Line]:
    if not airflow_here():  # asking would create ~/airflow, a second Airflow nobody runs
        return [warn(AIRFLOW, "元数据库", "这里没有 Airflow：AIRFLOW_HOME 没有设置，~/airflow 也不存在",
                     "在 Airflow 各组件所用的环境里运行 check（设好 AIRFLOW_HOME，或 docker compose run --rm airflow-cli …）")]
    load_models()  # here, not in the bounded thread (airflow_metadata.load_models)
    try:
        found = bounded(facts, options.timeout, "Airflow 的元数据库")
    except Exception as exc:
        return [fail(AIRFLOW, "元数据库", f"连不上（{reason(exc)}）",
                     "在 Airflow 运行的地方运行 check（docker compose run --rm airflow-cli …），或启动它的数据库；"
                     "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN 必须是这套部署的")]
    return [_pool_line(found, settings), _dag_line(found, settings, options, parse)]


def _pool_line(found: AirflowFacts, settings: Settings) -> Line:
    make = f"airflow pools set {POOL} {settings.analysis_tasks} 'Opportunity Radar: analysis tasks at once'"
    if found.pool_slots is None:
        return fail(AIRFLOW, f"资源池 {POOL}", "不存在：分析任务会一直等下去", f"运行 {make}")
    if found.pool_slots != settings.analysis_tasks:
        return warn(AIRFLOW, f"资源池 {POOL}", f"{found.pool_slots} 个槽位，而 analysis_tasks 是 {settings.analysis_tasks}",
                    f"运行 {make}（或改 analysis_tasks）")
    return ok(AIRFLOW, f"资源池 {POOL}", f"{found.pool_slots} 个槽位（analysis_tasks = {settings.analysis_tasks}）")


def _dag_line(found: AirflowFacts, settings: Settings, options: Options, parse: Callable[[], str | None]) -> Line:
    name = f"DAG {DAG_ID}"
    if found.import_error:
        return fail(AIRFLOW, name, f"导入错误：{reason(Exception(found.import_error))}",
                    f"修好 dags/{DAG_FILE}（airflow dags list-import-errors 显示完整的错误）")
    if not found.dag_known:
        try:  # in this thread: Airflow bounds a parse itself (dagbag_import_timeout, a signal: main thread only)
            error = parse()
        except Exception as exc:
            error = reason(exc)
        if error:
            return fail(AIRFLOW, name, f"在这里解析失败：{reason(Exception(error))}", f"修好 dags/{DAG_FILE}")
        text = "解析无误；Airflow 还没有登记它"
        if settings.demo_mode:
            return ok(AIRFLOW, name, text + "（演示：make run 或 make ui 会登记）")
        return warn(AIRFLOW, name, text, "启动 dag-processor（docker compose up），或运行 airflow dags reserialize")
    if found.stale:
        return warn(AIRFLOW, name, "已登记，但已过时（上次解析没看到它的文件）",
                    "检查 DAG bundle 的目录（dag_bundle_config_list 或 AIRFLOW__CORE__DAGS_FOLDER）与 dag-processor")
    if found.paused:
        text = "解析无误，已暂停"
        if settings.demo_mode:
            return ok(AIRFLOW, name, text + "（演示：在 make ui 里取消暂停，时段才会按时运行）")
        return warn(AIRFLOW, name, text + "：时段不会按时运行", f"airflow dags unpause {DAG_ID}")
    return ok(AIRFLOW, name, "解析无误，未暂停")
