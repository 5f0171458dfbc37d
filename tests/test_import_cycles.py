"""No import cycles among the project's modules (core, kernels, enginetui), and no test module imported by another.

Every `import` counts, also those inside functions (a lazy import still ties two modules
together). A package's own `__init__` is not counted as imported by its submodules, as in
pydeps: Python runs it first anyway, and an `__init__` that re-exports a submodule is not a cycle.
"""

import ast
from pathlib import Path

from tests.support.checkout import REPO_ROOT

PACKAGES = {
    "core": "enginetui.core",
    "kernels": "enginetui.kernels",
    "enginetui": "enginetui",
}  # folder -> installed name


def project_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    modules = {}
    for folder, installed in PACKAGES.items():
        for path in (REPO_ROOT / folder).rglob("*.py"):
            parts = path.relative_to(REPO_ROOT / folder).with_suffix("").parts
            modules[".".join([installed, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return modules


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that the module `name` (at `path`) imports, anywhere in its body."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:  # `import a.b.c` of a non-module name: its module
                    target = target.rpartition(".")[0]
                found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, `level - 1` packages up
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source)
    return {m for m in found if m in modules and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_are_resolved_including_lazy_and_relative_ones(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text("def f():\n    from pkg import y\n    from . import z\n    import pkg.w.thing\n")
    modules = {
        "pkg": pkg / "__init__.py",
        "pkg.x": pkg / "x.py",
        "pkg.y": pkg / "y.py",
        "pkg.z": pkg / "z.py",
        "pkg.w": pkg / "w.py",
    }
    assert imported("pkg.x", pkg / "x.py", modules) == {"pkg.y", "pkg.z", "pkg.w"}


def test_no_import_cycles_among_the_projects_modules():
    modules = project_modules()
    assert "enginetui.dashboard.app" in modules and "enginetui.core.engine.core" in modules
    graph = {name: imported(name, path, modules) for name, path in modules.items()}
    assert cycles(graph) == []


def modules_of_the_tests() -> dict[str, Path]:
    """Dotted module name -> file, for every module under tests/."""
    return {
        ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (REPO_ROOT / "tests").rglob("*.py")
    }


def test_no_test_module_imports_another_test_module_or_a_conftest():
    """What tests share lives in support modules (tests/support, tests/fakes, a folder's own helpers):
    pytest loads a test module or a conftest under its own rules, never as a library."""
    modules = modules_of_the_tests()
    graph = {name: imported(name, path, modules) for name, path in modules.items()}
    assert "tests.fakes.scripted_runner" in graph["tests.fakes.scripted_engine"]  # the scan sees the tests' imports
    shared = {
        f"{name} imports {target}"
        for name, targets in graph.items()
        for target in targets
        if target.rpartition(".")[2].startswith("test_") or target.rpartition(".")[2] == "conftest"
    }
    assert shared == set()


def test_the_shared_fakes_import_nothing_of_a_test_folder():
    """tests/fakes is the one place for shared fakes: what a fake needs lives there or in tests/support."""
    modules = modules_of_the_tests()
    outside = {
        f"{name} imports {target}"
        for name, path in modules.items()
        if name.startswith("tests.fakes.")
        for target in imported(name, path, modules)
        if not target.startswith(("tests.fakes", "tests.support"))
    }
    assert "tests.fakes.vllm_wire" in imported("tests.fakes.vllm_server", modules["tests.fakes.vllm_server"], modules)
    assert outside == set()
