"""What a run tested with what: the facts that make two runs' results comparable or mergeable
(one per replica, per transport, per version).

:func:`run_metadata` gives the suite version, the nnrp-py version, Python, the transport and
target, the model, and three digests: the manifest file's, the recipe set's (each recipe's id and file
digest, in id order, so the same recipes give the same digest wherever they live) and the
capability document's (canonical JSON: replicas of one service must announce the same).
Every case result carries it in ``diagnostics.run`` (the upstream case-results document has no
other open place), the NDJSON stream in its first line, the human reports in their header.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Iterable
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from nnrp_conformance import __version__

__all__ = ["document_digest", "file_digest", "recipe_set_digest", "run_label", "run_metadata"]


def file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def recipe_set_digest(recipes: Iterable[Any]) -> str:
    """One digest over (id, file digest) of each recipe, sorted by id."""
    h = hashlib.sha256()
    for recipe in sorted(recipes, key=lambda r: r.id):
        h.update(recipe.id.encode("utf-8") + b"\0")
        h.update(file_digest(Path(recipe.path)).encode("ascii") + b"\n")
    return "sha256:" + h.hexdigest()


def _nnrp_py_version() -> str | None:
    try:
        return importlib_metadata.version("nnrp-py")
    except importlib_metadata.PackageNotFoundError:
        return None


def _transport(target: str | None) -> str | None:
    if not target:
        return None
    # lazy on purpose: the wire module loads nnrp-py, which a pytest run without a target
    # (the plugin is loaded in every pytest run of the venv) must not pay for
    from nnrp_conformance.wire.pump import AddressError, parse_address

    try:
        return parse_address(target).transport
    except AddressError:
        return None


def document_digest(document: Any) -> str | None:
    """A digest of a JSON document in canonical form (sorted keys, no spaces), or None."""
    if document is None:
        return None
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_metadata(*, target: str | None, manifest: Path | None, recipes: Iterable[Any],
                 model_id: str | None, adapter: str | None,
                 capabilities: Any = None) -> dict[str, Any]:
    recipes = list(recipes)
    return {
        "suite_version": __version__,
        "nnrp_py_version": _nnrp_py_version(),
        "python": platform.python_version(),
        "target": target,
        "transport": _transport(target),
        "adapter": adapter,
        "model": model_id,
        "manifest_digest": file_digest(manifest) if manifest is not None else None,
        "recipe_count": len(recipes),
        "recipe_set_digest": recipe_set_digest(recipes),
        # two replicas of one service must announce the same document
        "capabilities_digest": document_digest(capabilities),
    }


def run_label(meta: dict[str, Any]) -> str:
    """A short name for one run in a merged report: target and transport."""
    target = meta.get("target") or "?"
    transport = meta.get("transport")
    return f"{target} ({transport})" if transport and transport != "tcp" else str(target)
