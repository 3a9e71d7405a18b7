"""The vLLM version families (reference_adapter/.../vllm_backend/families/): every declared
line is bound, each version by exactly one family, and every refusal says what to do (the
nearest tested version, the object a family could not find). No vLLM needed: the bindings are
data, and a family whose paths do not import is the refusal under test."""

from __future__ import annotations

import pytest

from vllm_nnrp_adapter import LINES, TESTED_VERSIONS
from vllm_nnrp_adapter.vllm_backend import UnsupportedVllmVersion
from vllm_nnrp_adapter.vllm_backend.families import (
    FAMILIES,
    Family,
    check_version_supported,
    nearest_tested,
    select,
)
from vllm_nnrp_adapter.vllm_backend.families.ranges import in_range
from vllm_nnrp_adapter.vllm_backend.symbols import SYMBOL_NAMES


def _minor_versions() -> list[str]:
    return [f"0.{minor}.{patch}" for minor in range(10, 40) for patch in (0, 3)]


def test_every_version_of_a_declared_line_is_bound_by_exactly_one_family() -> None:
    for version in _minor_versions():
        declared = any(in_range(version, line.declared) for line in LINES)
        covering = [f.name for f in FAMILIES if in_range(version, f.covers)]
        assert len(covering) <= 1, (version, covering)
        if declared:
            assert covering, f"{version} is declared but no family binds it"
            assert check_version_supported(version).name == covering[0]


@pytest.mark.parametrize("version", TESTED_VERSIONS)
def test_every_tested_version_is_supported(version: str) -> None:
    check_version_supported(version)


@pytest.mark.parametrize(("version", "nearest"), [("0.17.1", "0.18.1"), ("0.33.0", "0.32.0"),
                                                  ("0.34.2", "0.32.0"), ("1.0.0", "0.32.0")])
def test_a_version_outside_the_lines_is_refused_naming_the_nearest_tested(
        version: str, nearest: str) -> None:
    assert nearest_tested(version) == nearest
    with pytest.raises(UnsupportedVllmVersion) as refused:
        check_version_supported(version)
    message = str(refused.value)
    assert f"nearest tested version is {nearest}" in message
    assert all(line.declared in message for line in LINES)
    # the canary's override binds it with the nearest family instead
    assert check_version_supported(version, allow_unsupported=True) in FAMILIES


def test_a_declared_version_no_family_covers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(select, "FAMILIES", tuple(f for f in FAMILIES if f.name != "0.23"))
    with pytest.raises(UnsupportedVllmVersion, match=r"inside a declared line but no binding.*"
                       r"nearest tested version is 0\.23\.0"):
        check_version_supported("0.25.1")


def test_an_unreadable_version_is_refused() -> None:
    with pytest.raises(UnsupportedVllmVersion, match="cannot read"):
        check_version_supported("nightly")


def test_a_family_that_cannot_find_an_object_says_which_and_where() -> None:
    paths = {name: [("json", "dumps")] for name in SYMBOL_NAMES}
    paths["init_app_state"] = [("vllm_nnrp_adapter.no_such_module", "init_app_state"),
                               ("json", "no_such_attribute")]
    family = Family(name="9.9", covers=">=9.9,<9.10", paths=paths,
                    api_server_module="json.tool")
    with pytest.raises(UnsupportedVllmVersion) as refused:
        family.symbols()
    message = str(refused.value)
    assert "init_app_state" in message and "9.9 family" in message
    assert "no_such_module" in message and "json has no no_such_attribute" in message


def test_a_family_must_place_every_object() -> None:
    paths = {name: [("json", "dumps")] for name in SYMBOL_NAMES if name != "build_app"}
    with pytest.raises(ValueError, match="build_app"):
        Family(name="9.9", covers=">=9.9", paths=paths, api_server_module="json.tool")
