"""The import graph of include/ as the code states it: which module imports which — at module level, inside
functions (lazy imports), and under ``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:`` (they never run, but a
module that names another's types depends on it: a circle through them is a circle of the design) — its
circles, and the size of each product module. ``python -m tools.import_graph`` prints them, and which edges
are type-only; tests/test_architecture.py holds the rules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE_ROOT = REPO / "include"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``<anything>.TYPE_CHECKING`` (``typing.TYPE_CHECKING``, ``t.TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    """Line numbers of the statements under ``if TYPE_CHECKING:`` (either spelling)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                for inner in ast.walk(child):
                    if hasattr(inner, "lineno"):
                        lines.add(inner.lineno)
    return lines


def imports_in(source: str, this: str, *, is_package: bool, known: set[str]) -> tuple[set[str], set[str]]:
    """(every module of ``known`` that the module ``this`` imports, those of them it imports only for type
    checking). A module counts as imported however it is: at the top, inside a function, under TYPE_CHECKING."""
    tree = ast.parse(source)
    typing_only_lines = _type_checking_blocks(tree)
    package = this if is_package else this.rsplit(".", 1)[0]
    found: set[str] = set()
    at_run_time: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != this:
                found.add(name)
                if node.lineno not in typing_only_lines:
                    at_run_time.add(name)
    return found, found - at_run_time


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` imports (type-only imports included)."""
    found, _ = imports_in(path.read_text(encoding="utf-8"), module_name(path), is_package=path.name == "__init__.py",
                          known=known)
    return found


def type_only_edges() -> dict[str, set[str]]:
    """module -> the modules it imports only under ``if TYPE_CHECKING:`` (part of :func:`graph`'s edges)."""
    paths = {module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    known = set(paths)
    out = {}
    for name, path in paths.items():
        _, typing_only = imports_in(path.read_text(encoding="utf-8"), name, is_package=path.name == "__init__.py",
                                    known=known)
        if typing_only:
            out[name] = typing_only
    return out


def graph() -> tuple[dict[str, set[str]], dict[str, int]]:
    """(module -> the modules it imports, module -> its lines), for every module under include/."""
    paths = {module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    known = set(paths)
    edges = {name: imports_of(path, known) for name, path in paths.items()}
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in paths.items()}
    return edges, sizes


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main() -> int:
    edges, sizes = graph()
    product = {m: n for m, n in sizes.items() if m.startswith("include.radar.") or m == "include.radar"}
    print(f"{len(edges)} modules under include/, {sum(sizes.values()):,} lines; "
          f"product (include/radar): {len(product)} modules, {sum(product.values()):,} lines")
    for group in circles(edges):
        print(f"circle of {len(group)} modules:", ", ".join(group))
    for module, targets in sorted(type_only_edges().items()):
        print(f"type-only: {module} -> {', '.join(sorted(targets))}")
    print("largest product modules:")
    for name, lines in sorted(product.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {lines:5d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
