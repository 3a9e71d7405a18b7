"""Each package's import graph has no circle (issues 15 and 39): a module may import what sits
below it, never something that imports it back, not from inside a function body and not under
``if TYPE_CHECKING:`` either (an import for annotations only happens at no run time, but the
two files still cannot be read, changed or moved one without the other: a circle of rooms).

Read statically with ``ast`` (nothing is imported), every ``import`` of ``suite/`` and
``reference_adapter/`` counted wherever it stands. A circle is reported with its edges and
where each import stands, so the failure says what to move. What both sides of a circle need
goes below both (a small module of shared types or protocols, like
``vllm_nnrp_adapter/nnrp_server/sides.py``), never into a late import.

The adapter's rooms (issue 46): one folder per module of its design, in a declared layer order
(:data:`ROOM_IMPORTS`: which room may import which); the top folder holds ``cli.py`` and
``__init__.py`` only, and each room's ``__init__`` says on its second line what it may import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "nnrp_conformance": ROOT / "suite" / "nnrp_conformance",
    "vllm_nnrp_adapter": ROOT / "reference_adapter" / "vllm_nnrp_adapter",
}


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
        assert pkg in out, f"package {pkg} not found under {root}"
    return out


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, type_only: bool = True) -> list[ast.Import | ast.ImportFrom]:
    """Every import in ``tree`` wherever it stands; without those under ``if TYPE_CHECKING:``
    when ``type_only`` is false."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if not type_only and isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    # ``from pkg import mod`` imports the submodule pkg.mod; ``from mod import name`` only mod
    return [origin] + [f"{origin}.{alias.name}" for alias in node.names]


def import_graph(package: str | None = None) -> dict[str, dict[str, str]]:
    """module -> {imported module of ours: 'path:line' of the import}, every import counted
    (type-only ones too); the modules of ``package`` only when it is given."""
    mods = modules()
    graph: dict[str, dict[str, str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, str] = {}
        for node in _imports(tree):
            for target in _targets(name, path.name == "__init__.py", node):
                # a module's own packages are initialised before it: importing them is no edge
                if target in mods and target != name and not name.startswith(target + "."):
                    edges.setdefault(target, f"{path.relative_to(ROOT)}:{node.lineno}")
        graph[name] = edges
    if package is not None:
        graph = {
            m: {dst: where for dst, where in edges.items() if dst.split(".")[0] == package}
            for m, edges in graph.items()
            if m.split(".")[0] == package
        }
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


#: the fewest modules each package's walk must find (fewer: the layout moved under the test)
LEAST_MODULES = {"nnrp_conformance": 60, "vllm_nnrp_adapter": 60}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_package_has_no_import_circle(package: str) -> None:
    graph = import_graph(package)
    assert len(graph) >= LEAST_MODULES[package], "the walk found too few modules: layout moved"
    problems = []
    for component in cycles(graph):
        members = set(component)
        edges = [
            f"    {src} -> {dst} ({where})"
            for src in component
            for dst, where in sorted(graph[src].items())
            if dst in members
        ]
        problems.append("import circle among " + ", ".join(component) + ":\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}}, [["a", "b", "c"]]),
        ({"a": {"b": ""}, "b": {}, "c": {"c": ""}}, []),
        ({"a": {"b": ""}, "b": {"a": ""}, "c": {"d": ""}, "d": {"c": ""}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_cycles_are_found(graph: dict[str, dict[str, str]], expected: list[list[str]]) -> None:
    assert sorted(cycles(graph)) == expected


def test_imports_in_function_bodies_and_type_checking_blocks_count() -> None:
    source = "import os\n\ndef late():\n    from pkg import b\n"
    tree = ast.parse(source)
    assert [n.lineno for n in _imports(tree)] == [1, 4]
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n"
    assert [n.lineno for n in _imports(ast.parse(typed))] == [1, 3]
    assert [n.lineno for n in _imports(ast.parse(typed), type_only=False)] == [1]


#: the suite's faces and outputs; everything else in nnrp_conformance is the core
FACES = ("nnrp_conformance.plugin", "nnrp_conformance.plugin_items", "nnrp_conformance.cli",
         "nnrp_conformance.commands", "nnrp_conformance.reports", "nnrp_conformance.fixtures")


def test_the_suite_core_never_imports_a_report() -> None:
    graph = import_graph()
    core = [m for m in graph if m.startswith("nnrp_conformance")
            and not any(m == f or m.startswith(f + ".") for f in FACES)]
    assert "nnrp_conformance.session" in core and "nnrp_conformance.gate" in core
    found = [f"{m} -> {dst} ({where})" for m in sorted(core)
             for dst, where in sorted(graph[m].items())
             if dst == "nnrp_conformance.reports" or dst.startswith("nnrp_conformance.reports.")]
    assert found == []


#: the adapter's faces, the only modules outside its benchmarks that may import them
ADAPTER_FACES = ("vllm_nnrp_adapter.cli", "vllm_nnrp_adapter.release")
BENCHMARKS = "vllm_nnrp_adapter.benchmark"


def test_the_adapter_core_never_imports_a_benchmark() -> None:
    graph = import_graph("vllm_nnrp_adapter")
    core = [m for m in graph
            if not any(m == f or m.startswith(f + ".") for f in (*ADAPTER_FACES, BENCHMARKS))]
    assert "vllm_nnrp_adapter.conformance.conformance" in core
    assert "vllm_nnrp_adapter.launch.serve" in core
    found = [f"{m} -> {dst} ({where})" for m in sorted(core)
             for dst, where in sorted(graph[m].items())
             if dst == BENCHMARKS or dst.startswith(BENCHMARKS + ".")]
    assert found == []


# --- the adapter's rooms (issue 46) ------------------------------------------------------------

ADAPTER = "vllm_nnrp_adapter"
#: what the adapter's top folder holds besides its rooms
TOP_FILES = frozenset({"__init__.py", "cli.py", "py.typed"})

#: room -> the rooms it may import, read from the import graph after issue 46; bottom first.
#: A new arrow is a decision: add it here and to the room's "May import:" line only if the
#: order stays one (no arrow back up; test_the_room_table_is_a_layer_order).
ROOM_IMPORTS: dict[str, frozenset[str]] = {
    "profile": frozenset(),
    "observability": frozenset(),
    "tiny_model": frozenset(),
    "vllm_backend": frozenset({"profile"}),
    "nnrp_server": frozenset({"profile"}),
    "adapter": frozenset({"profile", "observability", "vllm_backend"}),
    "launch": frozenset({"profile", "observability", "vllm_backend", "nnrp_server", "adapter"}),
    "conformance": frozenset({"profile", "vllm_backend", "launch"}),
    "benchmark": frozenset({"profile", "observability", "vllm_backend", "nnrp_server", "adapter",
                            "launch"}),
    "release": frozenset({"profile", "vllm_backend", "launch", "conformance", "benchmark"}),
}
#: the top folder's modules: the package (the release policy's names) and the command (all)
TOP_IMPORTS: dict[str, frozenset[str]] = {
    ADAPTER: frozenset({"profile"}),
    f"{ADAPTER}.cli": frozenset(ROOM_IMPORTS),
}


def room_of(module: str) -> str:
    """``vllm_nnrp_adapter.launch.serve`` -> ``launch``; a module of the top folder is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOM_IMPORTS else module


def forbidden_room_imports(graph: dict[str, dict[str, str]]) -> list[str]:
    """Each import from one room into another that :data:`ROOM_IMPORTS` does not allow."""
    found = []
    for src, edges in sorted(graph.items()):
        here = room_of(src)
        allowed = ROOM_IMPORTS.get(here, TOP_IMPORTS.get(here, frozenset()))
        for dst, where in sorted(edges.items()):
            there = room_of(dst)
            if there != here and there not in allowed:
                may = ", ".join(sorted(allowed)) or "no room"
                found.append(f"{where}: {src} imports {dst}: room {here!r} may import {may}, "
                             f"not {there!r} (ROOM_IMPORTS in tests/unit/test_import_graph.py)")
    return found


def test_each_room_imports_only_the_rooms_the_table_allows() -> None:
    graph = import_graph(ADAPTER)
    assert f"{ADAPTER}.launch.serve" in graph and f"{ADAPTER}.profile.policy" in graph
    found = forbidden_room_imports(graph)
    assert found == [], "imports against the adapter's layer order:\n" + "\n".join(found)


def test_a_forbidden_import_is_named_with_where_it_stands() -> None:
    graph = {f"{ADAPTER}.profile.mapping": {f"{ADAPTER}.launch.settings": "x/mapping.py:7",
                                           f"{ADAPTER}.profile.profile": "x/mapping.py:8"},
             f"{ADAPTER}.launch.serve": {f"{ADAPTER}.adapter.adapter": "x/serve.py:3"}}
    assert forbidden_room_imports(graph) == [
        f"x/mapping.py:7: {ADAPTER}.profile.mapping imports {ADAPTER}.launch.settings: room "
        "'profile' may import no room, not 'launch' (ROOM_IMPORTS in "
        "tests/unit/test_import_graph.py)"]


def test_the_room_table_is_a_layer_order() -> None:
    table = {room: dict.fromkeys(allowed, "") for room, allowed in ROOM_IMPORTS.items()}
    assert all(dst in ROOM_IMPORTS for allowed in ROOM_IMPORTS.values() for dst in allowed)
    assert cycles(table) == []


def test_the_top_folder_holds_only_cli_init_and_the_rooms() -> None:
    root = PACKAGES[ADAPTER]
    strays = sorted(p.name for p in root.iterdir()
                    if p.name != "__pycache__" and not p.is_dir() and p.name not in TOP_FILES)
    assert strays == [], (
        f"{', '.join(strays)} in {root.relative_to(ROOT)}: the adapter's top folder holds "
        "cli.py and __init__.py only; a module goes into the room whose job it does "
        "(docs/architecture.md#where-new-code-goes)")
    rooms = {p.name for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == set(ROOM_IMPORTS), "a room on disk and ROOM_IMPORTS must name each other"
    assert all((root / room / "__init__.py").is_file() for room in rooms)


@pytest.mark.parametrize("room", sorted(ROOM_IMPORTS))
def test_each_room_says_what_it_owns_and_may_import(room: str) -> None:
    init = PACKAGES[ADAPTER] / room / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines()
    assert len(lines) >= 2 and lines[0] and lines[1].startswith("May import: "), (
        f"{init.relative_to(ROOT)}: line 1 says what the room owns, line 2 'May import: ...'")
    said = set(re.findall(r"(?<!`)`(\w+)`(?!`)", lines[1]))
    assert said == ROOM_IMPORTS[room], f"{init.relative_to(ROOT)}: {lines[1]}"


def test_the_suite_never_imports_the_adapter() -> None:
    graph = import_graph()
    found = [f"{m} -> {dst} ({where})" for m in sorted(graph) if m.startswith("nnrp_conformance")
             for dst, where in sorted(graph[m].items()) if dst.startswith("vllm_nnrp_adapter")]
    assert found == []



#: dependencies that may be absent (extras) or are heavy and needed by one command only
OPTIONAL = {"vllm", "torch", "transformers", "tokenizers", "prometheus_client", "starlette",
            "pydantic"}
LAZY_REASON = "lazy on purpose"


def test_imports_inside_functions_are_optional_or_say_why() -> None:
    """An import inside a function is an optional dependency, or the line above it says why
    it is lazy ("lazy on purpose: ..."); anything else belongs at the top of the module."""
    found = []
    for root in PACKAGES.values():
        for path in sorted(root.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            for fn in ast.walk(ast.parse(text)):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in _imports(fn):
                    name = node.names[0].name if isinstance(node, ast.Import) else node.module
                    if (name or "").split(".")[0] in OPTIONAL:
                        continue
                    above = " ".join(lines[max(0, node.lineno - 4):node.lineno - 1])
                    if LAZY_REASON not in above.lower():
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                                     f"{ast.unparse(node)}")
    assert found == [], "\n".join(found)
