"""nnrp-py's private entry points are touched in one module only, on the release they were
verified on (issue 15): ``vllm_nnrp_adapter/nnrp_server/sdk.py``.

Read statically with ``ast``: no other module of ``suite/`` or ``reference_adapter/`` imports
an underscore name from ``nnrp`` or reads one of the SDK-private attributes ``sdk.py`` uses;
and the installed nnrp-py is the release ``sdk.VERIFIED_NNRP_PY`` names, so an upgrade of
the pin fails here until someone re-checks those entry points.
"""

from __future__ import annotations

import ast
from importlib import metadata
from pathlib import Path

from vllm_nnrp_adapter.nnrp_server import sdk

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "reference_adapter" / "vllm_nnrp_adapter" / "nnrp_server" / "sdk.py"


def _private_attributes(tree: ast.AST) -> set[str]:
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    }


def _private_nnrp_imports(tree: ast.AST) -> list[str]:
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nnrp"
        for alias in node.names
        if alias.name.startswith("_")
    ]


def test_the_installed_nnrp_py_is_the_verified_release() -> None:
    assert metadata.version("nnrp-py") == sdk.VERIFIED_NNRP_PY, (
        "nnrp-py changed: re-check every private entry point in nnrp_server/sdk.py, then "
        "update VERIFIED_NNRP_PY"
    )


def test_private_nnrp_names_appear_in_the_sdk_module_only() -> None:
    sdk_tree = ast.parse(SDK.read_text(encoding="utf-8"))
    assert _private_nnrp_imports(sdk_tree), "sdk.py no longer imports a private name: update"
    # the SDK-private attributes sdk.py reads; a module of ours may have its own attribute of
    # the same name (a stall watch's _handle), so those names are checked on SDK objects only
    sdk_attrs = _private_attributes(sdk_tree) - {"_handle"}
    found = []
    for root in (ROOT / "suite", ROOT / "reference_adapter"):
        for path in sorted(root.rglob("*.py")):
            if path == SDK:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = path.relative_to(ROOT)
            found += [f"{where}: imports {name}" for name in _private_nnrp_imports(tree)]
            found += [f"{where}: reads .{name}" for name in
                      sorted(_private_attributes(tree) & sdk_attrs)]
    assert found == []
