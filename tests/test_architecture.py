"""The house stays easy to change. Read from the code's own imports (tools/import_graph.py,
type-only and lazy imports included): no import circle under include/, no module of the product over ~500
lines, no import up a floor (rooms → runtime → steps → the seam to Airflow), each DAG task's step in the module
named after it; and docs/architecture.md true: its table of modules names every module of
include/radar, sub-packages' members included, and only files that exist; its table of tests every test file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO
from tests.test_lint import comments_and_docstrings
from tools import import_graph

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
    seam = {m for m in edges if m.startswith("include.radar.seam.")}
    for module, imported in edges.items():
        if module.startswith("include.radar.") and module not in seam:
            assert not imported & seam, f"{module} imports the seam to Airflow"
    assert "include.radar.seam.support" in seam
    source = (REPO / "include" / "radar" / "seam" / "support.py").read_text(encoding="utf-8")
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top_level if "include.radar" in line]


def test_each_dag_task_runs_the_step_of_the_module_named_after_it() -> None:
    from include.radar import steps

    dag = (REPO / "dags" / "opportunity_radar.py").read_text(encoding="utf-8")
    called = set(re.findall(r'run_step\(\s*"(\w+)"', dag))
    assert called and called <= set(steps.STEPS)
    # one name from task to module: the task ``track_record`` runs the step ``track_record`` of
    # steps/track_record.py (the task id is the DAG's function's name)
    tasks = [(func.name, call.args[0].value) for func in ast.walk(ast.parse(dag)) if isinstance(func, ast.FunctionDef)
             for call in ast.walk(func) if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "run_step"]
    assert {step for _, step in tasks} == called and all(task == step for task, step in tasks), tasks
    for name in called:
        assert steps.load(name).__module__ == f"include.radar.steps.{steps.STEPS[name]}"
    files = {p.stem for p in (REPO / "include" / "radar" / "steps").glob("*.py")} - {"__init__", "runtime"}
    assert files == set(steps.STEPS.values())  # no step module the table does not name


def _architecture() -> str:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Which module owns what"):]
    return section[: section.index("\n## ", 10)]


def _table(head: str) -> list[str]:
    """The rows of the section's table that starts with the line ``head``."""
    table = _architecture().split(head + "\n", 1)[1].split("\n\n", 1)[0]
    return [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("|---")]


def _table_rows() -> list[str]:
    return _table("| module | owns |")


def _resolve(token: str, context: Path, packages: list[Path], root: Path) -> Path | None:
    """Where a file or directory the table names is: under the directory the row last named (``routes/``), under
    the row's own packages (``web/``), under include/radar, or under the repository (``plugins/…``)."""
    for base in (context, *packages, root, REPO):
        if (base / token.rstrip("/")).exists():
            return base / token.rstrip("/")
    return None


def test_the_architecture_docs_table_of_modules_names_every_module_and_only_files_that_exist() -> None:
    """Every module of include/radar, sub-packages' members included (``store/claims.py``,
    ``web/routes/record.py``), is named in the row of its package, and every file or directory the table names
    (a name ending in ``.py`` or ``/``, or with a ``/`` in it) exists."""
    root = REPO / "include" / "radar"
    named: set[Path] = set()
    missing: list[str] = []
    for row in _table_rows():
        cells = row.split(" | ")
        tokens = re.findall(r"`([^`\s]+)`", row)
        packages = [root / t.rstrip("/") for t in re.findall(r"`([^`\s]+)`", cells[0])
                    if t.endswith("/") and (root / t.rstrip("/")).is_dir()]
        context = packages[0] if packages else root
        for token in tokens:
            if ":" in token or not (token.endswith((".py", "/")) or "/" in token):
                continue  # a word (a function, a table, a command) or an address
            found = _resolve(token, context, packages, root)
            if found is None:
                missing.append(token)
                continue
            named.add(found)
            if found.is_dir() and found.is_relative_to(root) and found != root:
                context = found  # the names after ``routes/`` are routes/'s
    modules = {p for p in root.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts}
    rooms = modules | {p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert missing == []
    assert sorted(str(p.relative_to(root)) for p in rooms - named) == []


def test_the_architecture_docs_table_of_tests_names_every_test_file_and_only_files_that_exist() -> None:
    """The tests' layout is written down beside the rooms': every tests/test_*.py is in the table of the tests,
    and every test file it names exists."""
    named = {t for row in _table("| stage or room | tests |") for t in re.findall(r"`(test_\w+\.py)`", row)}
    files = {p.name for p in (REPO / "tests").glob("test_*.py")}
    assert sorted(files - named) == [] and sorted(named - files) == []


def test_no_room_climbs_a_floor_to_the_runtime_a_step_or_the_seam() -> None:
    """The floors of docs/architecture.md: the seam above the steps, the steps above the runtime, the runtime above the
    rooms; no room (the pages included) imports anything above it, not even for its types."""
    edges, _ = import_graph.graph()
    seam = {m for m in edges if m.startswith("include.radar.seam.")}

    def floor(module: str) -> int:
        if module in seam:
            return 3
        if module == "include.radar.steps.runtime":
            return 1
        return 2 if module.startswith("include.radar.steps") else 0

    climbs = sorted(f"{m} -> {t}" for m, targets in edges.items() if m.startswith("include.radar")
                    for t in targets if floor(t) > floor(m))
    assert climbs == []


def _package(module: str) -> str:
    """The room of include/radar a module belongs to: its package (``include.radar.collect``) or, at the top, itself."""
    parts = module.split(".")
    return ".".join(parts[:3])


def test_the_packages_of_include_radar_import_one_another_without_a_circle() -> None:
    """The tree shows the flow: core at the ground, store over it, then collect, analysis, pushes, report, operations
    and evaluation, the steps, the seam. Read package by package (every module of a package as one), no two
    packages import each other, however far round."""
    edges, _ = import_graph.graph()
    packages: dict[str, set[str]] = {}
    for module, targets in edges.items():
        if module.startswith("include.radar.") and module.count(".") >= 2:
            here = _package(module)
            packages.setdefault(here, set()).update(
                _package(t) for t in targets if t.startswith("include.radar.") and _package(t) != here)
    assert "include.radar.core" in packages and "include.radar.store" in packages["include.radar.collect"]
    assert import_graph.circles(packages) == []


def test_the_top_of_include_radar_reads_in_about_a_dozen_entries() -> None:
    top = sorted(p.name for p in (REPO / "include" / "radar").iterdir() if p.name != "__pycache__")
    assert top == ["__init__.py", "analysis", "check", "cli.py", "collect", "core", "evaluation", "market",
                   "operations", "pushes", "report", "seam", "steps", "store", "web"]


# the modules of include/radar that may import Airflow (``airflow`` or ``airflow.*``), and how: the seam at its
# top; the others only inside a function, to ask Airflow for what it holds and do without it when it is not there
AIRFLOW_AT_THE_TOP = {"include.radar.seam.support", "include.radar.seam.callbacks", "include.radar.seam.executor",
                      "include.radar.seam.plugin", "include.radar.seam.assets"}
AIRFLOW_INSIDE_A_FUNCTION = {
    "include.radar.check.airflow_facts",  # cli check: the pool, the DAG, its parse (only where Airflow is configured)
    "include.radar.core.settings",  # Variables, the task's context
    "include.radar.core.connection_info",  # connections
    "include.radar.core.redact",  # Airflow's log masker
    "include.radar.web.auth",  # the api-server's user and auth manager
}


def _airflow_imports(source: str) -> dict[int, bool]:
    """Line → whether it imports Airflow at the module's top (not inside a function), for each such import."""
    import ast

    tree = ast.parse(source)
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
              for n in ast.walk(f)}
    found: dict[int, bool] = {}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if any(n == "airflow" or n.startswith("airflow.") for n in names):
            found[node.lineno] = id(node) not in inside
    return found


def test_airflow_is_imported_only_in_the_seam_and_the_modules_that_ask_it_what_it_holds() -> None:
    """Beyond dags/ and plugins/, only the modules listed above import ``airflow`` or ``airflow.*``, the seam at
    its top, the others inside a function; any other product module imports no Airflow at all."""
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "include" / "radar").rglob("*.py")):
        module = import_graph.module_name(path)
        for line, top in _airflow_imports(path.read_text(encoding="utf-8")).items():
            allowed = module in AIRFLOW_AT_THE_TOP or (module in AIRFLOW_INSIDE_A_FUNCTION and not top)
            if not allowed:
                found.setdefault(module, []).append(f"line {line}" + (" (at the top)" if top else ""))
    assert found == {}


def test_the_airflow_import_rule_sees_an_import_at_the_top_and_inside_a_function() -> None:
    source = "import airflow.models\nfrom airflow import DAG\nimport airflowish\ndef f():\n    from airflow.sdk import x\n"
    assert _airflow_imports(source) == {1: True, 2: True, 5: False}


_SETATTR_RAISING_FALSE = re.compile(r"monkeypatch\.setattr\((?:[^()]|\([^()]*\))*raising\s*=\s*False", re.S)
_TIME_NAME = (r"(?:\w*clock\w*|today|now|utcnow|time|time_ns|monotonic|monotonic_ns|perf_counter|thread_time|process_time|"
              r"sleep|datetime|date)")
_PATCH_OF_TIME = re.compile(
    rf"monkeypatch\.setattr\(\s*(?:[\w.]+\s*,\s*[\"']|[\"'][\w.]+\.){_TIME_NAME}[\"']"  # (obj, "now") or ("mod.now")
    rf"|\bpatch\(\s*(?:target\s*=\s*)?[\"'](?:[\w.]+\.)?{_TIME_NAME}[\"']"  # mock.patch, patch, mocker.patch
    rf"|\bpatch\.object\(\s*[\w.]+\s*,\s*(?:attribute\s*=\s*)?[\"']{_TIME_NAME}[\"']")
_MODULE_CLOCK = re.compile(r"^_?\w*clock\w*\s*(:[^=]+)?=\s*(time|datetime)\.", re.M | re.I)
# the libraries that move the wall clock under the code instead of giving it a clock
_TIME_TRAVEL = {"time_machine", "freezegun"}


def _time_travel_imports(source: str) -> list[str]:
    """Each import of time_machine or freezegun in ``source``, however spelled: ``import``, ``from … import``,
    ``__import__``, ``importlib.import_module`` or ``pytest.importorskip`` of the name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and (
                getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in (
                "__import__", "import_module", "importorskip"):
            names = [str(node.args[0].value)]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in _TIME_TRAVEL]
    return [f"line {line}: {name}" for line, name in sorted(found)]


def test_time_is_given_never_patched_and_no_patch_may_miss_its_target() -> None:
    """One clock (core/clock.py), given where the radar takes one: no product module keeps a clock in a global for
    tests to patch; no test patches time into a module (monkeypatch.setattr, mock.patch, patch.object) nor
    imports a library that moves the wall clock (time_machine, freezegun); and no test patches with
    ``raising=False`` (a renamed target would silently stop being faked)."""
    globals_ = [str(p.relative_to(REPO)) for p in (REPO / "include").rglob("*.py")
                if _MODULE_CLOCK.search(p.read_text(encoding="utf-8"))]
    tests = sorted(p for p in (REPO / "tests").glob("*.py") if p.name != "test_architecture.py")  # not its own examples
    lenient = [str(p.relative_to(REPO)) for p in tests if _SETATTR_RAISING_FALSE.search(p.read_text(encoding="utf-8"))]
    timed = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in tests
             for m in _PATCH_OF_TIME.finditer(p.read_text(encoding="utf-8"))]
    travel = [f"{p.relative_to(REPO)} {found}" for p in tests for found in _time_travel_imports(p.read_text(encoding="utf-8"))]
    assert (globals_, lenient, timed, travel) == ([], [], [], [])


_WALL_CLOCK = re.compile(r"\b(?:datetime\.(?:now|utcnow|today)|date\.today|time\.(?:time|monotonic|sleep|perf_counter|"
                         r"thread_time|process_time|time_ns|monotonic_ns))\(|^\s*(?:import time\b|from time import)", re.M)


def _reads_of_the_wall_clock(source: str) -> list[str]:
    """The lines of ``source`` that read the system's time or wait on it, comments and docstrings aside."""
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    for _, text in comments_and_docstrings(source):
        code = code.replace(text, "")
    return [m.group(0) for m in _WALL_CLOCK.finditer(code)]


def test_only_the_clock_reads_the_wall_clock() -> None:
    """Every reader of the time in include/radar takes the injected Clock (now, monotonic, sleep, cpu): no module
    but core/clock.py calls datetime.now(), time.monotonic(), time.sleep() or their kin, nor imports ``time``."""
    found = {str(p.relative_to(REPO)): reads for p in sorted((REPO / "include" / "radar").rglob("*.py"))
             if p.name != "clock.py" and (reads := _reads_of_the_wall_clock(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_time_rules_see_what_they_forbid() -> None:
    assert _reads_of_the_wall_clock("import time\nx = datetime.now(UTC)\ntime.sleep(1)\n") == [
        "import time", "datetime.now(", "time.sleep("]
    assert _reads_of_the_wall_clock('def f():\n    """waits ``time.sleep(1)``"""\n    return 1  # time.time()\n') == []
    assert _MODULE_CLOCK.search("x = 1\n_rules_clock = time.monotonic  # a test's own\n")
    assert _SETATTR_RAISING_FALSE.search('monkeypatch.setattr(mod, "X", f(2), raising=False)')
    assert not _SETATTR_RAISING_FALSE.search('monkeypatch.delenv("X", raising=False)')
    for patched in ('monkeypatch.setattr(spending, "today", lambda: DAY)', 'monkeypatch.setattr(regex_rules, "_cost_clock", t)',
                    'monkeypatch.setattr(time, "sleep", lambda s: None)', 'monkeypatch.setattr("time.monotonic", tick)',
                    'mock.patch("time.sleep")', '@patch("include.radar.collect.werss.time.time", return_value=0)',
                    'unittest.mock.patch(target="time.monotonic")', 'mocker.patch("include.radar.core.clock.datetime")',
                    'patch.object(time, "sleep")', 'mock.patch.object(clock_module, "datetime", Frozen)',
                    'patch.object(werss.time, attribute="monotonic")', 'with patch.object(Clock, "now", lambda self: AT):'):
        assert _PATCH_OF_TIME.search(patched), patched
    for other in ('monkeypatch.setattr(backup, "_run", spy)', 'mock.patch("include.radar.core.db.connect")',
                  'patch.object(client, "now_playing")', 'monkeypatch.setenv("TIME", "1")'):
        assert not _PATCH_OF_TIME.search(other), other
    assert _time_travel_imports(
        "import time_machine\nimport freezegun.api as fz\nimport os, time_machine as tm\n"
        "from time_machine import travel\nfrom freezegun import freeze_time\nfrom freezegun.api import FakeDatetime\n"
        "def f():\n    import time_machine\n    return __import__('freezegun')\n"
        "tm = importlib.import_module('time_machine')\nfg = pytest.importorskip('freezegun')\n"
    ) == ["line 1: time_machine", "line 2: freezegun.api", "line 3: time_machine", "line 4: time_machine",
          "line 5: freezegun", "line 6: freezegun.api", "line 8: time_machine", "line 9: freezegun",
          "line 10: time_machine", "line 11: freezegun"]
    assert _time_travel_imports("import time\nfrom datetime import datetime\nimport machine_time\n"
                                "from . import time_machine_notes\nx = load('freezegun')\n") == []


# ------------------------------------------------------------------------------------------ the folders' roles

SETUP_SCRIPTS = {"bootstrap.sh", "airflow_cfg.py"}  # what `make` and the guide run to set a machine up


def _imported(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of each import in the file at ``path``, lazy ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
    return found


def _crossings(paths, forbidden) -> list[str]:
    return sorted(f"{p.name}: {m} {names}" for p in paths for m, names in _imported(p) if forbidden(m, names))


def _a_test_s_own(module: str, names: list[str]) -> bool:
    """A test module, or a test's private name: what no tooling may import."""
    return module.startswith("tests.test_") or (module.split(".")[0] == "tests" and any(
        n.startswith(("_", "test_")) for n in names))


def test_each_folder_holds_its_role() -> None:
    """scripts/ holds the set-up alone; the benchmarks live in bench/ (each run by a `make bench*` target), the
    acceptance drivers and the docs' and tests' helpers in tools/; no tooling imports a test module or a test's
    private name, and the product imports none of them."""
    assert {p.name for p in (REPO / "scripts").iterdir() if p.is_file()} == SETUP_SCRIPTS
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    run = set(re.findall(r"python -m bench\.(\w+)", makefile))
    benches = {p.stem for p in (REPO / "bench").glob("*.py")}
    assert run and run <= benches and benches - run == {"memory_imports", "memory_roles"}  # bench-memory's parts
    tooling = [*(REPO / "bench").glob("*.py"), *(REPO / "tools").glob("*.py")]
    assert _crossings(tooling, _a_test_s_own) == []
    product = [*(REPO / "include").rglob("*.py"), *(REPO / "dags").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]
    assert _crossings(product, lambda m, _: m.split(".")[0] in {"tests", "bench", "tools", "scripts"}) == []


def test_the_folder_roles_notice_a_tool_importing_a_test_module(tmp_path: Path) -> None:
    tool = tmp_path / "driver.py"
    tool.write_text("from tests.test_backfill import DAYS\ndef f():\n    from tests import _private\n"
                    "from tests.slotrun import article\n", encoding="utf-8")
    assert _crossings([tool], _a_test_s_own) == [
        "driver.py: tests ['_private']", "driver.py: tests.test_backfill ['DAYS']"]


# ------------------------------------------------------------------------------------ names where they are made

MAX_PARAMETERS = 8


def _modules() -> dict[str, Path]:
    """Every module of include/ by its dotted name."""
    return {import_graph.module_name(p): p for p in (REPO / "include").rglob("*.py")}


def _top_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(the names a module defines at its top, the names it imports there)."""
    defined, imported = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            imported |= {a.asname or a.name for a in node.names}
    return defined, imported - defined


def _borrowed(paths: list[Path], modules: dict[str, Path]) -> list[str]:
    """Each ``from M import n`` / ``M.n`` in ``paths`` that takes from a module of include/ a name it only
    imported itself (a re-export), or a private name of another module."""
    tops = {m: _top_names(ast.parse(p.read_text(encoding="utf-8"))) for m, p in modules.items()}
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        here = import_graph.module_name(path) if path.is_relative_to(REPO / "include") else path.name
        aliases = {a.asname or a.name: f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                   and n.module for a in n.names if f"{n.module}.{a.name}" in tops}
        aliases |= {a.asname or a.name: a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                    if a.name in tops and (a.asname or "." not in a.name)}
        taken = [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module in tops
                 for a in n.names]
        taken += [(aliases[n.value.id], n.attr) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                  and isinstance(n.value, ast.Name) and n.value.id in aliases]
        for module, name in taken:
            if f"{module}.{name}" in tops or module == here:
                continue  # a submodule, or a module's own name
            defined, imported = tops[module]
            if name in imported and name not in defined:
                found.append(f"{here}: {module}.{name} (re-exported)")
            elif name.startswith("_") and not name.startswith("__"):
                found.append(f"{here}: {module}.{name} (private)")
    return sorted(set(found))


def _long_signatures(paths: list[Path]) -> list[str]:
    """``module.function (n)`` for each function of ``paths`` taking more than MAX_PARAMETERS parameters
    (positional, keyword-only, ``*args`` and ``**kwargs``; a method's ``self`` / ``cls`` aside)."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                positional = [*a.posonlyargs, *a.args]
                n = len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
                n -= bool(positional) and positional[0].arg in ("self", "cls")
                if n > MAX_PARAMETERS:
                    found.append(f"{path.stem}.{node.name} ({n})")
    return sorted(found)


def _product() -> list[Path]:
    return [*(REPO / "include").rglob("*.py"), *(REPO / "dags").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]


def test_each_name_is_taken_from_the_module_that_makes_it_and_no_private_name_crosses_modules() -> None:
    """No re-export shims: the product, the tests and the tooling import a name from the module that defines it
    (store/__init__ names its rooms only); no product module takes another's private name (tests may)."""
    modules = _modules()
    tooling = [*(REPO / "tests").glob("*.py"), *(REPO / "tools").glob("*.py"), *(REPO / "bench").glob("*.py")]
    found = _borrowed(_product(), modules) + [f for f in _borrowed(tooling, modules) if f.endswith("(re-exported)")]
    assert found == []
    defined, _ = _top_names(ast.parse((REPO / "include" / "radar" / "store" / "__init__.py").read_text("utf-8")))
    assert defined == {"__all__"}  # the package holds its rooms' names, nothing of its own


def test_the_name_rules_see_a_re_export_and_a_private_name(tmp_path: Path) -> None:
    made, shim, user = tmp_path / "made.py", tmp_path / "shim.py", tmp_path / "user.py"
    made.write_text("def thing(): ...\n_secret = 1\n", encoding="utf-8")
    shim.write_text("from made import thing as thing\nfrom made import _secret\n", encoding="utf-8")
    user.write_text("from shim import thing\nimport shim\nshim.thing()\nfrom made import _secret, thing\n",
                    encoding="utf-8")
    modules = {"made": made, "shim": shim}
    assert _borrowed([user], modules) == ["user.py: made._secret (private)", "user.py: shim.thing (re-exported)"]


def test_no_function_takes_more_than_8_parameters() -> None:
    """Past eight, what a function needs travels together: the settings, a page context, a frozen dataclass of
    the values that go together (push.Occasion, ingest.SlotIngest, llm.LLMOptions, spending.Asking)."""
    assert _long_signatures(_product()) == []


def test_the_signature_rule_counts_every_kind_of_parameter(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def plain(a, b, c, d, e, f, g, h, i): ...\n"
                      "def keywords(a, b, c, d, *, e, f, g, h, i): ...\n"
                      "def rest(a, b, c, d, e, f, g, *args, **kwargs): ...\n"
                      "class C:\n    def method(self, a, b, c, d, e, f, g, h): ...\n", encoding="utf-8")
    assert _long_signatures([source]) == ["m.keywords (9)", "m.plain (9)", "m.rest (9)"]
