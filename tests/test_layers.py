"""The package's layers hold (docs/layout.md): import-linter's contracts (``[tool.importlinter]``
in pyproject.toml), and a check over the modules' own imports that no module imports another
module's ``_private`` names and that no imports form a circle.

The second check reads every ``import`` and ``from ... import`` of the library, the simulator
(``testing/``) and ``benchmarks/``, wherever it stands (inside functions and ``if TYPE_CHECKING``
blocks too), so a lazy import cannot hide a circle.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_acid"


def _modules(root: Path, folders: Iterable[str]) -> dict[str, Path]:
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    parts = module.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(
    root: Path, folders: Iterable[str]
) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """Every module's imports of the other modules under ``folders``, and the imports of
    another module's private names: (importer, owner, name)."""
    modules = _modules(root, folders)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    private: list[tuple[str, str, str]] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    owner = _owner(alias.name, modules)
                    if owner and owner != module:
                        edges[module].add(owner)
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, is_package, node)
                if base is None:
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:  # a module imported from its package
                        edges[module].add(full)
                        continue
                    owner = _owner(base, modules)
                    if owner is None or owner == module:
                        continue
                    edges[module].add(owner)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append((module, owner, alias.name))
    return edges, private


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        circles.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return circles


def test_no_private_imports_across_modules() -> None:
    _, private = import_graph(ROOT, [PACKAGE, "benchmarks"])
    assert private == [], "imports of another module's private names: " + "; ".join(
        f"{importer} imports {name} from {owner}" for importer, owner, name in private
    )


def test_no_import_circles() -> None:
    edges, _ = import_graph(ROOT, [PACKAGE, "benchmarks"])
    # benchmarks are scripts: they import each other by bare name (their folder is sys.path[0])
    for module in [m for m in edges if m.startswith("benchmarks.")]:
        path = ROOT / (module.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if f"benchmarks.{node.module}" in edges:
                    edges[module].add(f"benchmarks.{node.module}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
                name = node.args[0].value if node.args else None  # type: ignore[attr-defined]
                if isinstance(name, str) and f"benchmarks.{name}" in edges:
                    edges[module].add(f"benchmarks.{name}")
    assert import_circles(edges) == []


def test_the_checks_see_a_circle_and_a_private_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import _hidden\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n_hidden = 1\n"
    )
    (package / "c.py").write_text("import pkg.a\n")
    edges, private = import_graph(tmp_path, ["pkg"])
    assert private == [("pkg.a", "pkg.b", "_hidden")]
    assert import_circles(edges) == [["pkg.a", "pkg.b"]]


def test_layer_contracts() -> None:
    """import-linter's contracts (pyproject.toml) are kept: layers, and no Airflow below the
    Airflow layer."""
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint_imports is None:
        pytest.fail("lint-imports is not installed: `make install` (the test extra has it)")
    done = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" in done.stdout and " 0 broken" in done.stdout, done.stdout
