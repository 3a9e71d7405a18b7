"""Every file and module of ours the docs name exists (issue 43 item 6: four module paths in the
docs and the CHANGELOG had moved away).

Read: README.md, CHANGELOG.md and every page under docs/. Checked:

* a path ending in ``.py`` whose first folder is one of ours (a top-level folder of the
  repository, a package, or a folder inside a package: ``benchmark/soak/results.py``) resolves
  from the repository root, ``suite/``, ``reference_adapter/``, a package root, the benchmark
  folder (the performance pages name its modules from there) or the example endpoint's folder; a bare file name (``inflight.py``) is a file somewhere in the tree;
* a dotted module path (``nnrp_conformance.gate.smoke``, ``vllm_nnrp_adapter.benchmark.BENCHMARKS``)
  is a module of ours, and a name after the module is one the module defines at its top level.
  An old name the adapter keeps (``vllm_nnrp_adapter.ALIASES``: ``vllm_nnrp_adapter.vllm_plugin``)
  is checked as the module it names.

Not ours, so not checked: vLLM's source files the operator guide cites by vLLM's own paths
(their first folder is vLLM's: ``entrypoints/``, ``v1/``), a path after "not" (a counterexample:
"``benchmark/parity/report.py``, not ``benchmark/parity_report.py``"), a shell variable's path
(``$EXAMPLE/endpoint.py``), and the few names below.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from vllm_nnrp_adapter import ALIASES

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"nnrp_conformance": REPO / "suite" / "nnrp_conformance",
            "vllm_nnrp_adapter": REPO / "reference_adapter" / "vllm_nnrp_adapter"}
ROOTS = (REPO, REPO / "suite", REPO / "reference_adapter", *PACKAGES.values(),
         PACKAGES["vllm_nnrp_adapter"] / "benchmark", REPO / "docs" / "examples" / "minimal_endpoint")

#: named by the docs and not files of this repository: a provider's own test files (the plugin
#: page's examples) and vLLM's modules the operator guide names bare after their full path
NOT_OURS = {"tests/test_mine.py", "tests/test_provider.py", "api_server.py", "envs.py"}

_PY_PATH = re.compile(r"(?<![\w./$-])((?:[\w-]+/)*[\w-]+\.py)(?![\w/])")
_MODULE = re.compile(r"(?<![\w./-])((?:nnrp_conformance|vllm_nnrp_adapter)(?:\.\w+)+)")
_COUNTEREXAMPLE = re.compile(r"\bnot\s+`?$")


def pages() -> list[Path]:
    found = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [p for p in found if not p.is_symlink()]  # docs/changelog.md is the CHANGELOG


@cache
def _tree_files() -> frozenset[str]:
    return frozenset(p.name for root in ("suite", "reference_adapter", "tests", "scripts", "docs")
                     for p in (REPO / root).rglob("*.py"))


@cache
def _our_folders() -> frozenset[str]:
    inside = {p.name for root in PACKAGES.values() for p in root.rglob("*") if p.is_dir()}
    top = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return frozenset(inside | top | set(PACKAGES)) - {"__pycache__"}


def path_problem(path: str) -> str | None:
    if path in NOT_OURS:
        return None
    if "/" not in path:
        return None if path in _tree_files() else f"no file {path} in the tree"
    if path.split("/", 1)[0] not in _our_folders():
        return None  # another project's path (vLLM's)
    if any((root / path).is_file() for root in ROOTS):
        return None
    return f"no file {path}"


@cache
def _top_level_names(module: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def module_problem(dotted: str) -> str | None:
    for old, new in ALIASES.items():  # an old name the adapter keeps for its new module
        if dotted == old or dotted.startswith(old + "."):
            dotted = new + dotted[len(old):]
            break
    first, *rest = dotted.split(".")
    here = PACKAGES[first]
    while rest and ((here / rest[0]).is_dir() or (here / f"{rest[0]}.py").is_file()):
        here = here / rest.pop(0)
    if not rest:
        return None
    source = here / "__init__.py" if here.is_dir() else here.with_name(f"{here.name}.py")
    if rest[0] in _top_level_names(source):
        return None
    return f"{dotted}: no module or name {rest[0]!r} in {source.relative_to(REPO)}"


def problems(page: Path) -> Iterator[str]:
    text = re.sub(r"https?://\S+", "", page.read_text(encoding="utf-8"))
    for match in _PY_PATH.finditer(text):
        if _COUNTEREXAMPLE.search(text[max(0, match.start() - 8):match.start()]):
            continue
        if (problem := path_problem(match.group(1))) is not None:
            yield problem
    for match in _MODULE.finditer(text):
        if (problem := module_problem(match.group(1).rstrip("."))) is not None:
            yield problem


def test_every_file_and_module_the_docs_name_exists() -> None:
    found = pages()
    assert len(found) > 30
    assert [f"{page.relative_to(REPO)}: {p}" for page in found for p in problems(page)] == []


def test_the_check_finds_a_path_or_module_that_is_gone(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "`benchmark/soak/results.py` and `benchmark/soak_results.py`; `tiny_model/` and "
        "`tiny_model.py`; `benchmark/parity/report.py`, not `benchmark/parity_report.py`; "
        "vLLM's `entrypoints/openai/api_server.py`; `nnrp_conformance.gate.smoke`, "
        "`nnrp_conformance.contract.ERROR_CODES`, `nnrp_conformance.contract.NO_SUCH_NAME`, "
        "`vllm_nnrp_adapter.gone_module`; `$EXAMPLE/endpoint.py`.\n", encoding="utf-8")
    assert list(problems(page)) == [
        "no file benchmark/soak_results.py",
        "no file tiny_model.py in the tree",
        "nnrp_conformance.contract.NO_SUCH_NAME: no module or name 'NO_SUCH_NAME' in "
        "suite/nnrp_conformance/contract.py",
        "vllm_nnrp_adapter.gone_module: no module or name 'gone_module' in "
        "reference_adapter/vllm_nnrp_adapter/__init__.py",
    ]
