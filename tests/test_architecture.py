"""Issue 26 §1: the house stays easy to change. Read from the code's own imports (scripts/import_graph.py):
no import circle under include/, no module of the product over ~500 lines, the seam to Airflow above the
steps (never imported by them), each DAG task's step in the module named after it, and the README's table of
modules naming every room of include/radar."""

from __future__ import annotations

import re

from scripts import import_graph
from tests.conftest import REPO

MAX_LINES = 500


def test_no_module_under_include_imports_itself_back_through_others() -> None:
    edges, _ = import_graph.graph()
    assert "include.radar.steps.analyse" in edges  # the graph is read, not empty
    assert import_graph.circles(edges) == []


def test_the_graph_sees_a_circle_when_there_is_one() -> None:
    assert import_graph.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_graph_counts_lazy_and_type_checking_imports_of_either_spelling() -> None:
    known = {"pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.e"}
    source = (
        "import typing\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.b import Thing\n"
        "if typing.TYPE_CHECKING:\n    import pkg.c\n"
        "def later():\n    from pkg import d\n"
        "from . import e\n"
    )
    found, typing_only = import_graph.imports_in(source, "pkg.a", is_package=False, known=known)
    assert found == {"pkg.b", "pkg.c", "pkg.d", "pkg.e"}
    assert typing_only == {"pkg.b", "pkg.c"}


def test_no_product_module_is_over_500_lines() -> None:
    _, sizes = import_graph.graph()
    big = {m: n for m, n in sizes.items() if m.startswith("include.radar") and n > MAX_LINES}
    assert big == {}


def test_the_steps_never_import_the_seam_to_airflow_and_the_seam_imports_no_step_at_module_level() -> None:
    edges, _ = import_graph.graph()
    seam = {"include.radar.airflow_support", "include.radar.airflow_alerts"}
    for module, imported in edges.items():
        if module.startswith("include.radar.") and module not in seam:
            assert not imported & seam, f"{module} imports the seam to Airflow"
    source = (REPO / "include" / "radar" / "airflow_support.py").read_text(encoding="utf-8")
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top_level if "include.radar" in line]


def test_each_dag_task_runs_the_step_of_the_module_named_after_it() -> None:
    from include.radar import steps

    dag = (REPO / "dags" / "opportunity_radar.py").read_text(encoding="utf-8")
    called = set(re.findall(r'run_step\(\s*"(\w+)"', dag))
    assert called and called <= set(steps.STEPS)
    for name in called:
        assert steps.load(name).__module__ == f"include.radar.steps.{steps.STEPS[name]}"
    files = {p.stem for p in (REPO / "include" / "radar" / "steps").glob("*.py")} - {"__init__"}
    assert files == set(steps.STEPS.values())  # no step module the table does not name


def test_the_readmes_table_of_modules_names_every_room_of_the_product() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("### Which module owns what"):]
    table = table[: table.index("\n### ", 10)]
    named = set(re.findall(r"`([\w/]+?)(?:\.py)?/?`", table))
    rooms = {p.stem for p in (REPO / "include" / "radar").glob("*.py") if p.stem != "__init__"}
    rooms |= {p.name for p in (REPO / "include" / "radar").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms - named == set()
