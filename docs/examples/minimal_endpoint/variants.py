"""Conformant variants of the minimal endpoint: the profile kept, the suite's recommendations not.

A variant is not a defect: an endpoint built the way another implementation of the profile
builds it. The suite must pass it (with non-strict notes) and fail it only when asked to be
strict. ``upstream-names`` answers like the upstream vLLM NNRP adapter
(NagareWorks/vllm-nnrp-adapter): its error-code names, a top-level ``diagnostics`` field on
every event, and no discovery operation (``nnrp.capabilities.get`` is answered
``unsupported_operation``, as the profile prescribes for an operation not advertised).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

VARIANTS: Final = MappingProxyType(
    {
        "upstream-names": (
            "the upstream adapter's error-code names (unsupported_schema_version, invalid_body, "
            "request_timeout, backend_overload), a top-level diagnostics field on every event, "
            "no discovery operation"
        ),
    }
)

#: our code -> the upstream adapter's name for it (the error.type family is unchanged)
UPSTREAM_CODE_NAMES: Final = MappingProxyType(
    {
        "invalid_schema_version": "unsupported_schema_version",
        "invalid_request": "invalid_body",
        "timeout": "request_timeout",
        "overloaded": "backend_overload",
    }
)


def check_variant(name: str | None) -> str | None:
    """Return ``name`` when it is a known variant (or None); raise ValueError naming the choices."""
    if name is None or name in VARIANTS:
        return name
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")


def restyle(event: dict[str, Any], variant: str | None, operation_id: int) -> dict[str, Any]:
    """The event as the variant sends it."""
    if variant != "upstream-names":
        return event
    out = dict(event)
    err = out.get("error")
    if isinstance(err, dict) and err.get("code") in UPSTREAM_CODE_NAMES:
        out["error"] = {**err, "code": UPSTREAM_CODE_NAMES[err["code"]]}
    out["diagnostics"] = {"adapter": "minimal-endpoint", "operation_id": operation_id}
    return out


def serves_discovery(variant: str | None) -> bool:
    return variant != "upstream-names"
