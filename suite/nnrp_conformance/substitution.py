"""Recipe parameters: ``${NAME}`` placeholders (``$${...}`` escapes one) substituted in a
recipe's request, from the run's parameters, where ``recipe.id:NAME`` overrides ``NAME`` for
one recipe; an unknown or malformed placeholder is a :class:`~nnrp_conformance.plan.PlanError`
naming the recipe and the JSON pointer."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.plan import PlanError
from nnrp_conformance.recipes import Recipe

__all__ = ["PARAM_MODEL_ID", "PARAM_UNSUPPORTED_OPERATION", "resolve_parameters", "substitute"]

#: the parameters the suite itself fills: the model under test, and an operation not claimed
PARAM_MODEL_ID = "MODEL_ID"
PARAM_UNSUPPORTED_OPERATION = "UNSUPPORTED_OPERATION"

_PLACEHOLDER = re.compile(r"\$(\$?)\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _sub_string(text: str, params: Mapping[str, str], where: str, pointer: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return "${" + name + "}"
        if not _NAME.match(name):
            raise PlanError(f"{where}: {pointer or '/'}: malformed placeholder "
                            f"{match.group(0)!r} (use ${{NAME}} with letters, digits and _; "
                            f"write $${{…}} for a literal)")
        if name not in params:
            known = ", ".join(sorted(params)) or "none"
            raise PlanError(f"{where}: {pointer or '/'}: unknown parameter ${{{name}}} "
                            f"(known: {known}; set it with --nnrp-param {name}=VALUE)")
        return str(params[name])

    return _PLACEHOLDER.sub(replace, text)


def substitute(obj: Any, params: Mapping[str, str], *, where: str, pointer: str = "") -> Any:
    """A deep copy of ``obj`` with every ``${NAME}`` placeholder in string values filled."""
    if isinstance(obj, str):
        return _sub_string(obj, params, where, pointer)
    if isinstance(obj, dict):
        return {k: substitute(v, params, where=where, pointer=f"{pointer}/{_escape(str(k))}")
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [substitute(v, params, where=where, pointer=f"{pointer}/{i}")
                for i, v in enumerate(obj)]
    return copy.deepcopy(obj)


def _split_params(params: Mapping[str, str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """Run-wide params and recipe-scoped ones (keys ``<recipe id>:NAME``)."""
    global_: dict[str, str] = {}
    scoped: dict[str, dict[str, str]] = {}
    for key, value in params.items():
        recipe_id, sep, name = key.rpartition(":")
        target = scoped.setdefault(recipe_id, {}) if sep else global_
        name = name if sep else key
        if not _NAME.match(name):
            raise PlanError(f"--nnrp-param {key}={value}: parameter names are letters, digits "
                            f"and _ (optionally prefixed by '<recipe id>:')")
        target[name] = str(value)
    return global_, scoped


def resolve_parameters(
    recipe: Recipe, *, model_id: str | None = None, params: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], set[str]]:
    """The parameter values for ``recipe`` (precedence: module doc) and the explicit names."""
    global_, scoped = _split_params(params or {})
    values: dict[str, str] = dict(defaults or {})
    values.setdefault(PARAM_MODEL_ID, contract.PLACEHOLDER_MODEL_ID)
    values.update(recipe.parameters)
    if model_id and values.get(PARAM_MODEL_ID) == contract.PLACEHOLDER_MODEL_ID:
        values[PARAM_MODEL_ID] = model_id
    explicit = {**global_, **scoped.get(recipe.id, {})}
    values.update(explicit)
    return values, set(explicit)
