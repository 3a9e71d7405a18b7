"""The closed lists in the JSON Schemas equal the ones in contract.py (the source of truth)."""

from __future__ import annotations

import pytest

from nnrp_conformance import contract
from nnrp_conformance.validation import load_schema, schema_names


def test_every_id_is_under_the_contract_base_uri() -> None:
    for name in schema_names():
        assert load_schema(name)["$id"] == f"{contract.SCHEMA_BASE_URI}{name}.schema.json"


def test_error_codes_and_types() -> None:
    body = load_schema("error-body")["$defs"]["recommended"]
    assert body["properties"]["code"]["enum"] == list(contract.ERROR_CODES)
    assert body["properties"]["type"]["enum"] == list(contract.ERROR_TYPES)
    pairing = {
        rule["if"]["properties"]["code"]["const"]: rule["then"]["properties"]["type"]["const"]
        for rule in body["allOf"]
    }
    assert pairing == dict(contract.ERROR_CODES)
    assert set(contract.ERROR_CODES.values()) <= set(contract.ERROR_TYPES)


def test_event_types_and_schema_files() -> None:
    dispatch = load_schema("event")
    assert dispatch["properties"]["type"]["enum"] == list(contract.EVENT_TYPES)
    routed = {
        rule["if"]["properties"]["type"]["const"]: rule["then"]["$ref"]
        for rule in dispatch["allOf"]
    }
    assert routed == {t: f"{n}.schema.json" for t, n in contract.EVENT_SCHEMA_NAMES.items()}
    assert set(contract.EVENT_SCHEMA_NAMES) == set(contract.EVENT_TYPES)
    for event_type, name in contract.EVENT_SCHEMA_NAMES.items():
        assert load_schema(name)["properties"]["type"] == {"const": event_type}
    recipe = load_schema("recipe")
    assert recipe["$defs"]["expected_event"]["properties"]["type"]["enum"] == list(
        contract.EVENT_TYPES
    )


def test_operations() -> None:
    caps = load_schema("capability-document")
    names = caps["$defs"]["operation"]["properties"]["name"]["enum"]
    assert names == list(contract.PROFILE_OPERATIONS)
    assert contract.OP_CAPABILITIES_GET not in names
    flags = set(caps["$defs"]["operation"]["properties"]) - {"name"}
    assert flags == set(contract.OPERATION_FLAG_CAPABILITIES)
    manifest = load_schema("manifest")
    assert manifest["properties"]["operations"]["items"]["$ref"] == (
        "capability-document.schema.json#/$defs/operation"
    )


def test_levels() -> None:
    caps = load_schema("capability-document")
    assert caps["$defs"]["levels"]["items"]["enum"] == list(contract.LEVELS)
    assert load_schema("recipe")["properties"]["level"]["enum"] == list(contract.LEVELS)


@pytest.mark.parametrize(
    "name",
    [
        "capability-document",
        "manifest",
        "recipe",
        "execution-plan",
        "case-results",
        "release-gate-report",
    ],
)
def test_profile_and_schema_version_constants(name: str) -> None:
    props = load_schema(name)["properties"]
    assert props["profile"] == {"const": contract.PROFILE}
    assert props["schema_version"] == {"const": contract.SCHEMA_VERSION}


def test_envelope_fields_and_hints() -> None:
    env = load_schema("envelope")
    assert env["properties"]["schema_version"] == {"const": contract.SCHEMA_VERSION}
    assert list(env["properties"]) == list(contract.ENVELOPE_FIELDS)
    assert list(env["$defs"]["nnrp"]["properties"]) == list(contract.NNRP_HINTS)
    overrides = load_schema("recipe")["$defs"]["envelope_overrides"]
    assert [p for p in overrides["properties"] if p != "omit"] == list(contract.ENVELOPE_FIELDS)
    assert overrides["properties"]["omit"]["items"]["enum"] == list(contract.ENVELOPE_FIELDS)


def test_recipe_statuses() -> None:
    assert load_schema("recipe")["properties"]["status"]["enum"] == list(contract.RECIPE_STATUSES)
    plan = load_schema("execution-plan")["properties"]
    assert plan["cases"]["items"]["properties"]["status"]["enum"] == list(contract.RECIPE_STATUSES)
    statuses = plan["coverage_matrix"]["items"]["properties"]["statuses"]
    assert statuses["required"] == [f"{s}_cases" for s in contract.RECIPE_STATUSES]
    report = load_schema("release-gate-report")["properties"]
    assert report["recipes"]["items"]["properties"]["status"]["enum"] == list(
        contract.RECIPE_STATUSES
    )


def test_terminals() -> None:
    assert load_schema("recipe")["$defs"]["expect"]["properties"]["terminal"]["enum"] == list(
        contract.TERMINALS
    )
    results = load_schema("case-results")["properties"]["results"]["items"]["properties"]
    assert results["terminal"]["enum"] == list(contract.TERMINALS)
    report = load_schema("release-gate-report")["properties"]["recipes"]["items"]["properties"]
    assert report["terminal"]["enum"] == list(contract.TERMINALS)
    assert set(contract.TERMINAL_EVENT_FOR.values()) == set(contract.TERMINAL_EVENT_TYPES)


def test_outcomes() -> None:
    results = load_schema("case-results")["properties"]["results"]["items"]["properties"]
    assert results["outcome"]["enum"] == list(contract.OUTCOMES)
    report = load_schema("release-gate-report")["properties"]["recipes"]["items"]["properties"]
    assert report["outcome"]["enum"] == list(contract.OUTCOMES)


def test_release_gates() -> None:
    report = load_schema("release-gate-report")
    assert report["$defs"]["gate"]["properties"]["name"]["enum"] == list(contract.RELEASE_GATES)
    gates = report["properties"]["gates"]
    assert [rule["contains"]["properties"]["name"]["const"] for rule in gates["allOf"]] == list(
        contract.RELEASE_GATES
    )
    assert gates["minItems"] == gates["maxItems"] == len(contract.RELEASE_GATES)
