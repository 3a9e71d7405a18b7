"""Which model each operation's recipes run against (docs/selection.md#models).

Owns ``--nnrp-model`` (``ID`` for every operation, ``OP=ID`` for one; repeatable, the pytest
plugin and the CLI alike) and the choice, per operation, in this order:

1. ``--nnrp-model OP=ID``;
2. ``--nnrp-model ID`` (the run-wide model);
3. the first model of the capability document whose ``operations`` lists the operation, then
   the same in the manifest (a model entry's ``operations`` is our addition: the profile's
   §13 example lists models as ``{id, owned_by}`` and says nothing of which serves what);
4. the capability document's first model that states no operations (else its first), then
   the manifest's: a guess. When the documents list more than one model, or some model
   states what it serves and none states this operation, every case of the operation says
   so (a note on the case, shown with its result) and names the option that fixes it.

The run-wide model (``${MODEL_ID}`` of a recipe without an operation of its own, the
reproduce command, the reports' header) is the chat operation's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.options import SetupError

__all__ = ["ModelChoice", "choose_models", "parse_model_options"]

#: what an operation name looks like (``chat.completions.create``); a model id seldom does
_OPERATION_NAME = re.compile(r"[a-z_]+(?:\.[a-z_]+)+")


def parse_model_options(values: Sequence[str] | str | None, *, option: str = "--nnrp-model"
                        ) -> tuple[str | None, dict[str, str]]:
    """``["ID"]`` / ``["OP=ID", ...]`` -> (run-wide model, {operation: model}). ``OP`` must
    be an operation of the profile; a value whose part before ``=`` does not look like an
    operation name is a model id as a whole."""
    if values is None:
        return None, {}
    items = [values] if isinstance(values, str) else list(values)
    run_wide: str | None = None
    per_op: dict[str, str] = {}
    for item in items:
        op, sep, model = item.partition("=")
        if sep and _OPERATION_NAME.fullmatch(op):
            if op not in contract.PROFILE_OPERATIONS:
                raise SetupError(f"{option} {item!r}: {op!r} is not an operation of the "
                                 f"profile ({', '.join(contract.PROFILE_OPERATIONS)})")
            if not model:
                raise SetupError(f"{option} {item!r}: no model id after {op}=")
            if per_op.get(op, model) != model:
                raise SetupError(f"{option}: two models for {op} ({per_op[op]!r}, {model!r})")
            per_op[op] = model
            continue
        if not item:
            raise SetupError(f"{option} needs a model id (ID or OPERATION=ID)")
        if run_wide not in (None, item):
            raise SetupError(f"{option}: two run-wide models ({run_wide!r}, {item!r}); give "
                             f"one per operation as OPERATION=ID")
        run_wide = item
    return run_wide, per_op


@dataclass(frozen=True)
class ModelChoice:
    """The model of each operation, and what the run says about a guessed one."""

    #: the run-wide model (the chat operation's)
    default: str | None
    by_operation: dict[str, str] = field(default_factory=dict)
    #: operation -> why its model is a guess (a note on each of its cases)
    notes: dict[str, str] = field(default_factory=dict)
    #: operation -> where its model came from ("option", "capability document", ...)
    sources: dict[str, str] = field(default_factory=dict)


def _entries(doc: Mapping[str, Any] | None) -> list[tuple[str, tuple[str, ...] | None]]:
    """(id, operations it states or None) of each well-formed model entry of ``doc``."""
    out = []
    for model in (doc or {}).get("models") or ():
        if isinstance(model, Mapping) and isinstance(model.get("id"), str) and model["id"]:
            ops = model.get("operations")
            stated = tuple(o for o in ops if isinstance(o, str)) if isinstance(ops, list) \
                else None
            out.append((str(model["id"]), stated))
    return out


def choose_models(operations: Sequence[str], *, run_wide: str | None,
                  per_operation: Mapping[str, str], capabilities: Mapping[str, Any] | None,
                  manifest: Mapping[str, Any] | None) -> ModelChoice:
    """The model of each of ``operations`` (module doc)."""
    sources = (("capability document", _entries(capabilities)), ("manifest", _entries(manifest)))
    by_op: dict[str, str] = {}
    notes: dict[str, str] = {}
    where: dict[str, str] = {}
    for op in operations:
        if op in per_operation:
            by_op[op], where[op] = per_operation[op], f"--nnrp-model {op}=ID"
            continue
        if run_wide is not None:
            by_op[op], where[op] = run_wide, "--nnrp-model ID"
            continue
        stated = next(((m, name) for name, entries in sources for m, ops in entries
                       if ops is not None and op in ops), None)
        if stated is not None:
            by_op[op], where[op] = stated[0], f"the {stated[1]}"
            continue
        for name, entries in sources:
            if not entries:
                continue
            open_ = [m for m, ops in entries if ops is None]
            by_op[op] = (open_ or [entries[0][0]])[0]
            where[op] = f"the {name}'s first model"
            if len(entries) > 1 or any(ops is not None for _m, ops in entries):
                notes[op] = (f"the {name} does not say which of its models serves {op}: ran "
                             f"against {by_op[op]!r} (give --nnrp-model {op}=ID)")
            break
    default = by_op.get(contract.OP_CHAT_COMPLETIONS_CREATE) or run_wide or next(
        iter(by_op.values()), None)
    return ModelChoice(default, by_op, notes, where)
