"""Which binding serves the installed vLLM: the family whose range takes its version, inside a
line the release policy declares. Chosen once at start-up; nothing outside this package
compares vLLM versions (tests/unit/test_version_checks.py holds the adapter to that)."""

from __future__ import annotations

from ...profile.policy import LINES, SUPPORTED_VLLM, TESTED_VERSIONS
from ..versions import UnsupportedVllmVersion
from .base import Family
from .ranges import in_range, release, releases_apart
from .v0_18 import FAMILY as V0_18
from .v0_23 import FAMILY as V0_23
from .v0_29 import FAMILY as V0_29

__all__ = ["FAMILIES", "check_version_supported", "family_for", "limitations", "nearest_tested"]

#: every binding, oldest family first
FAMILIES: tuple[Family, ...] = (V0_18, V0_23, V0_29)


def nearest_tested(version: str) -> str:
    """The tested version closest to ``version`` (the policy's lower bounds and current lines)."""
    return min(TESTED_VERSIONS, key=lambda tested: releases_apart(version, tested))


def _covering(version: str) -> Family | None:
    return next((f for f in FAMILIES if in_range(version, f.covers)), None)


def check_version_supported(version: str, *, allow_unsupported: bool = False) -> Family:
    """The family that binds vLLM ``version``; :class:`UnsupportedVllmVersion` when the version
    is outside every declared line, or inside one but of a family no binding covers (each
    refusal names the nearest tested version). ``allow_unsupported`` (canary runs, the operator
    accepts the risk) takes any readable version and binds it with the nearest family."""
    if not release(version):
        raise UnsupportedVllmVersion(f"cannot read the vLLM version {version!r}")
    family = _covering(version)
    if allow_unsupported:
        return family or min(FAMILIES, key=lambda f: releases_apart(version, f.name))
    nearest = nearest_tested(version)
    declared = [line.declared for line in LINES]
    if not any(in_range(version, spec) for spec in declared):
        raise UnsupportedVllmVersion(
            f"vLLM {version!r} is outside the supported lines {' and '.join(declared)} "
            f"({SUPPORTED_VLLM}); the nearest tested version is {nearest}: install it, or pass "
            "allow_unsupported to try anyway")
    if family is None:
        raise UnsupportedVllmVersion(
            f"vLLM {version!r} is inside a declared line but no binding of this adapter covers "
            f"its family (bindings: {', '.join(f.covers for f in FAMILIES)}); the nearest tested "
            f"version is {nearest}")
    return family


def family_for(version: str) -> Family:
    """The binding for ``version`` whether or not it is supported (the nearest family)."""
    return check_version_supported(version, allow_unsupported=True)


def limitations(version: str) -> dict[str, str]:
    """Feature -> why vLLM ``version`` cannot keep it (empty when it keeps them all)."""
    return family_for(version).limitations(version)
