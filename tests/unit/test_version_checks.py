"""Only the vLLM version families compare vLLM versions (issue 28): whatever differs between
vLLM releases is one family binding's to say (reference_adapter/.../vllm_backend/families/),
chosen once at start-up; no other module of the adapter tests a version.

What counts as testing a version, read from each module's syntax tree: an ordering comparison
(<, <=, >, >=) with a version-named operand; any comparison with a version literal ("0.22.1",
a (0, 22) tuple); importing the families' version arithmetic (``families.ranges``) or
``packaging.version``/``packaging.specifiers``. Comparing with the release policy's data
(``version in CURRENT_TESTED``: which tested versions a run covers) is selection, not a test of
what vLLM does, and stays allowed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "reference_adapter" / "vllm_nnrp_adapter"
FAMILIES = PACKAGE / "vllm_backend" / "families"
_VERSION_LITERAL = re.compile(r"^v?\d+\.\d+(\.\d+)?([a-z.+-]\w*)?$")
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_FORBIDDEN_IMPORTS = ("packaging.version", "packaging.specifiers")


def _names_a_version(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        name = (sub.id if isinstance(sub, ast.Name) else sub.attr
                if isinstance(sub, ast.Attribute) else None)
        if name is not None and "version" in name.lower():
            return True
    return False


def _version_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_VERSION_LITERAL.match(node.value))
    if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
        return all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
    return False


def version_tests(source: str) -> list[str]:
    """Each place in ``source`` that tests a vLLM version, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_version_literal(o) for o in operands) or (
                    any(isinstance(op, _ORDERING) for op in node.ops)
                    and any(_names_a_version(o) for o in operands)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith(_FORBIDDEN_IMPORTS) or module.endswith("families.ranges") \
                    or (module.endswith("families") and any(a.name == "ranges"
                                                            for a in node.names)):
                found.append(f"{node.lineno}: from {module} import ...")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith(_FORBIDDEN_IMPORTS)]
    return found


def _modules_outside_the_families() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if FAMILIES not in p.parents)


@pytest.mark.parametrize("path", _modules_outside_the_families(),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outside_the_families_tests_a_vllm_version(path: Path) -> None:
    assert version_tests(path.read_text(encoding="utf-8")) == [], (
        f"{path.relative_to(PACKAGE)} tests a vLLM version: move what differs between vLLM "
        "releases into its family binding (vllm_backend/families/)")


@pytest.mark.parametrize("snippet", [
    'if version >= "0.29": pass',
    "if release(v)[:2] < (0, 22): pass",
    "if vllm.__version__ == '0.32.0': pass",
    "if parse(backend.version) > floor: pass",
    "from vllm_nnrp_adapter.vllm_backend.families.ranges import in_range",
    "from packaging.version import Version",
])
def test_the_check_sees_each_way_of_testing_a_version(snippet: str) -> None:
    assert version_tests(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "parity = version in CURRENT_TESTED",
    "if version is None: pass",
    "if limitations(version): pass",
    "if count >= 3: pass",
])
def test_selection_by_the_policy_is_not_a_version_test(snippet: str) -> None:
    assert version_tests(snippet) == []


def test_the_families_themselves_do_test_versions() -> None:
    """The check is not vacuous: the one place allowed to compare versions does."""
    assert any(version_tests(p.read_text(encoding="utf-8")) for p in FAMILIES.glob("*.py"))
