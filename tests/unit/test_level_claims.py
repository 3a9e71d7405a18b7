"""What the adapter claims per vLLM line (Levels 2 and 3), and the body checks of the two new
operations (docs/levels.md).

The capability document is the manifest's claims less the operations whose backend features
the vLLM line breaks, and less every level that then loses its operation; the per-line
manifest a suite run uses on the lower-bound line claims exactly what the adapter offers there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.validation import validate, validate_event
from vllm_nnrp_adapter.adapter.adapter import (
    OPERATION_FEATURES,
    VllmNnrpAdapter,
    withheld_operations,
)
from vllm_nnrp_adapter.conformance.conformance import LIMITED_LINE_MANIFEST, manifest_for_vllm
from vllm_nnrp_adapter.launch.settings import default_manifest_path
from vllm_nnrp_adapter.profile import profile
from vllm_nnrp_adapter.profile.bodies import (
    OPERATOR_ONLY_FIELDS,
    check_embeddings_body,
    check_models_body,
    check_responses_body,
)
from vllm_nnrp_adapter.profile.policy import LINES, NEWEST_TESTED
from vllm_nnrp_adapter.profile.profile import ProfileError
from vllm_nnrp_adapter.vllm_backend.families import family_for, limitations
from vllm_nnrp_adapter.vllm_backend.lines import (
    FEATURE_EMBEDDINGS,
    FEATURE_MODELS,
    FEATURE_RESPONSES_STREAM_TOOLS,
    NO_EMBEDDINGS_ENGINE,
)

REPO = Path(__file__).resolve().parents[2]
#: the first line's lower bound: the one tested version that claims less (docs/levels.md)
LOWER_BOUND = LINES[0].lower_bound
MANIFEST = json.loads((REPO / "manifests" / "vllm-nnrp-adapter.json").read_text())


class LineBackend:
    """A backend double with a vLLM line's limitations and every method."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.served_model_names = ["tiny-model"]
        self.limitations = limitations(version)

    async def chat(self, body, *, request_id):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def responses(self, body, *, request_id):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def list_models(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def embeddings(self, body, *, request_id):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def abort(self, request_id: str) -> bool:
        return False


def _claims(doc: dict) -> tuple[list[int], list[dict]]:
    return doc["compatibility_levels"], doc["operations"]


def test_the_manifest_claims_levels_1_2_3_with_the_four_operations():
    assert validate("manifest", MANIFEST) == []
    assert MANIFEST["compatibility_levels"] == [1, 2, 3]
    ops = {op["name"]: op for op in MANIFEST["operations"]}
    assert ops[contract.OP_RESPONSES_CREATE] == {
        "name": contract.OP_RESPONSES_CREATE, "streaming": True, "non_streaming": True,
        "tool_calls": True, "cancellation": True}
    assert ops[contract.OP_MODELS_LIST] == {
        "name": contract.OP_MODELS_LIST, "streaming": False, "non_streaming": True,
        "tool_calls": False}
    assert ops[contract.OP_EMBEDDINGS_CREATE] == {
        "name": contract.OP_EMBEDDINGS_CREATE, "streaming": False, "non_streaming": True,
        "tool_calls": False}


def test_the_current_line_keeps_every_claim():
    adapter = VllmNnrpAdapter(LineBackend(NEWEST_TESTED), MANIFEST)
    assert adapter.withheld == {}
    assert _claims(adapter.capabilities) == _claims(MANIFEST)
    assert validate("capability-document", adapter.capabilities) == []
    assert manifest_for_vllm(NEWEST_TESTED, embeddings=True) == default_manifest_path()


def test_without_an_embeddings_engine_only_embeddings_create_is_withheld():
    """vLLM runs one runner per engine: the generating engine alone serves no embeddings,
    and Level 3 stays with models.list; the suite's manifest for such a run says the same."""
    backend = LineBackend(NEWEST_TESTED)
    backend.limitations[FEATURE_EMBEDDINGS] = NO_EMBEDDINGS_ENGINE
    adapter = VllmNnrpAdapter(backend, MANIFEST)
    assert adapter.withheld == {contract.OP_EMBEDDINGS_CREATE: NO_EMBEDDINGS_ENGINE}
    doc = adapter.capabilities
    assert doc["compatibility_levels"] == [1, 2, 3]
    assert contract.OP_EMBEDDINGS_CREATE not in adapter.operations
    without = json.loads(manifest_for_vllm(NEWEST_TESTED).read_text())
    assert validate("manifest", without) == []
    assert _claims(doc) == _claims(without)


def test_the_lower_bound_line_claims_level_1_only_and_its_manifest_says_so():
    """vLLM 0.18.1 breaks Responses streaming with tools: no Level 2, and so no Level 3
    (a higher level includes the lower ones); the per-line manifest is exactly that."""
    backend = LineBackend(LOWER_BOUND)
    assert FEATURE_RESPONSES_STREAM_TOOLS in backend.limitations
    adapter = VllmNnrpAdapter(backend, MANIFEST)
    assert set(adapter.withheld) == {contract.OP_RESPONSES_CREATE}
    assert "0.18.1" in adapter.withheld[contract.OP_RESPONSES_CREATE]
    doc = adapter.capabilities
    assert doc["compatibility_levels"] == [1]
    assert [op["name"] for op in doc["operations"]] == [contract.OP_CHAT_COMPLETIONS_CREATE]
    assert adapter.operations == (contract.OP_CHAT_COMPLETIONS_CREATE,)
    lower = json.loads(LIMITED_LINE_MANIFEST.read_text())
    assert validate("manifest", lower) == []
    assert manifest_for_vllm(LOWER_BOUND) == LIMITED_LINE_MANIFEST
    assert _claims(doc) == _claims(lower)
    assert {k: v for k, v in lower.items() if k not in ("compatibility_levels", "operations")} \
        == {k: v for k, v in MANIFEST.items() if k not in ("compatibility_levels", "operations")}


@pytest.mark.parametrize(("version", "limited"), [("0.18.1", True), ("0.21.9", True),
                                                  ("0.22.0", False), ("0.22.1", False),
                                                  ("0.23.0", False), ("0.32.0", False)])
def test_the_line_boundary(version, limited):
    assert bool(limitations(version)) is limited


@pytest.mark.parametrize(("version", "family"), [
    ("0.18.1", "0.18"), ("0.22.1", "0.18"), ("0.23.0", "0.23"), ("0.28.2", "0.23"),
    ("0.29.0", "0.29"), ("0.32.0", "0.29"), ("0.34.1", "0.29"), ("0.17.1", "0.18")])
def test_each_version_is_bound_by_its_family(version, family):
    assert family_for(version).name == family


def _levels_offered(version: str) -> list[int]:
    """What the adapter claims on vLLM ``version`` with an embeddings engine beside it."""
    backend = LineBackend(version)
    backend.limitations.pop(FEATURE_EMBEDDINGS, None)
    return VllmNnrpAdapter(backend, MANIFEST).capabilities["compatibility_levels"]


@pytest.mark.parametrize("version", [v for line in LINES for v in line.tested])
def test_the_policy_states_the_levels_the_adapter_claims(version):
    """The release policy's levels for each tested version are what the adapter offers there
    (its family's limitations decide), so the gate holds the evidence to the truth."""
    (line,) = [line for line in LINES if version in line.tested]
    assert list(line.levels[version]) == _levels_offered(version)


def test_the_levels_page_lists_each_tested_version_as_the_policy_does():
    rows = {}
    for row in (REPO / "docs" / "levels.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0][:1].isdigit():
            rows[cells[0]] = ([int(x) for x in cells[3].split(",")], cells[2], cells[4])
    expected = {v: list(line.levels[v]) for line in LINES for v in line.tested}
    assert {v: r[0] for v, r in rows.items()} == expected
    for version, (levels, family, why) in rows.items():
        assert family == family_for(version).name
        # a level not claimed has its reason written
        assert bool(why) is (levels != [1, 2, 3]), version


def test_level_3_goes_only_with_both_of_its_operations():
    doc = profile.capability_document(MANIFEST, ["m"], withheld=[contract.OP_MODELS_LIST])
    assert doc["compatibility_levels"] == [1, 2, 3]
    doc = profile.capability_document(
        MANIFEST, ["m"], withheld=[contract.OP_MODELS_LIST, contract.OP_EMBEDDINGS_CREATE])
    assert doc["compatibility_levels"] == [1, 2]
    assert [op["name"] for op in doc["operations"]] == [
        contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_RESPONSES_CREATE]
    assert validate("capability-document", doc) == []


def test_a_chat_only_backend_is_offered_chat_only():
    class ChatOnly:
        def __init__(self) -> None:
            self.served_model_names = ["m"]

        async def chat(self, body, *, request_id):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        async def abort(self, request_id: str) -> bool:
            return False

    withheld = withheld_operations(ChatOnly())
    assert set(withheld) == set(OPERATION_FEATURES)
    doc = VllmNnrpAdapter(ChatOnly(), MANIFEST).capabilities
    assert _claims(doc) == ([1], [MANIFEST["operations"][0]])


def test_without_withholding_the_document_is_the_manifest():
    old = {**MANIFEST, "compatibility_levels": [1], "operations": MANIFEST["operations"][:1]}
    assert _claims(profile.capability_document(old, ["m"])) == _claims(old)
    backend = LineBackend(NEWEST_TESTED)
    backend.limitations = {FEATURE_MODELS: "no models object"}
    assert _claims(VllmNnrpAdapter(backend, old).capabilities) == _claims(old)


# --- bodies ----------------------------------------------------------------------------------


def _error(call) -> dict:  # type: ignore[no-untyped-def]
    with pytest.raises(ProfileError) as info:
        call()
    event = info.value.event()
    assert validate_event(event) == []
    return event


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "body.input"),
        ({"model": "m", "input": 42}, "body.input"),
        ({"model": "m", "input": {"role": "user"}}, "body.input"),
        ({"model": 3, "input": "hi"}, "body.model"),
        ({"input": "hi", "stream": "yes"}, "body.stream"),
        ({"input": "hi", "store": True}, "body.store"),
        ({"input": "hi", "background": True}, "body.background"),
        ({"input": "hi", "previous_response_id": "resp_1"}, "body.previous_response_id"),
        *[({"input": "hi", name: {}}, f"body.{name}") for name in sorted(OPERATOR_ONLY_FIELDS)],
    ],
)
def test_bad_responses_bodies_are_invalid_request_naming_the_field(body, param):
    event = _error(lambda: check_responses_body(body))
    assert event["error"]["code"] == contract.ERR_INVALID_REQUEST
    assert event["nnrp"]["diagnostics"]["param"] == param


@pytest.mark.parametrize("body", [
    {"input": "hi"},
    {"input": [{"role": "user", "content": "hi"}], "stream": True},
    {"input": "hi", "store": False, "background": False, "previous_response_id": None},
])
def test_good_responses_bodies_pass(body):
    check_responses_body(body)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "body.input"),
        ({"input": 42}, "body.input"),
        ({"input": ""}, "body.input"),
        ({"input": []}, "body.input"),
        ({"input": ["hi", ""]}, "body.input"),
        ({"input": ["hi", {"text": "x"}]}, "body.input"),
        ({"input": [[]]}, "body.input"),
        ({"input": "hi", "model": 3}, "body.model"),
        ({"input": "hi", "dimensions": 0}, "body.dimensions"),
        ({"input": "hi", "dimensions": True}, "body.dimensions"),
        ({"input": "hi", "encoding_format": "base64"}, "body.encoding_format"),
        ({"input": "hi", "stream": True}, "body.stream"),
        *[({"input": "hi", name: {}}, f"body.{name}") for name in sorted(OPERATOR_ONLY_FIELDS)],
    ],
)
def test_bad_embeddings_bodies_are_invalid_request_naming_the_field(body, param):
    """docs/levels.md#embeddings: a number, an empty string or array is invalid_request, as
    OpenAI answers them with 400; so are a base64 encoding and a stream."""
    event = _error(lambda: check_embeddings_body(body))
    assert event["error"]["code"] == contract.ERR_INVALID_REQUEST
    assert event["nnrp"]["diagnostics"]["param"] == param


@pytest.mark.parametrize("body", [
    {"input": "hi"},
    {"model": "m", "input": ["Hi.", "A longer one."], "encoding_format": "float"},
    {"input": [[1, 2, 3], [4]], "dimensions": 8},
    {"input": [1, 2, 3], "stream": False, "user": "u"},
])
def test_good_embeddings_bodies_pass(body):
    check_embeddings_body(body)


def test_operator_fields_pass_when_the_operator_allows_them():
    check_responses_body({"input": "hi", "kv_transfer_params": {}},
                         allowed_operator_fields=["kv_transfer_params"])


def test_models_list_takes_any_object_and_nothing_else():
    check_models_body({})
    check_models_body({"ignored": 1})
    assert _error(lambda: check_models_body([]))["error"]["code"] == contract.ERR_INVALID_REQUEST


@pytest.mark.parametrize("event", [
    profile.item_text_delta_event(0, "msg_1", "hi"),
    profile.reasoning_text_delta_event(0, "rs_1", "hmm"),
    profile.output_item_added_event(0, {"id": "msg_1", "type": "message", "content": []}),
    profile.output_item_done_event(1, {"id": "fc_1", "type": "function_call", "call_id": "c"}),
], ids=lambda e: e["type"])
def test_level2_builders_emit_schema_valid_events(event):
    assert validate_event(event) == []


def _manifest_command(argv: list[str], capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    from vllm_nnrp_adapter.cli import main as vllm_nnrp
    try:
        code = vllm_nnrp(["manifest", *argv])
    except SystemExit as exc:  # argparse's error exit
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_manifest_command_prints_what_a_deployment_claims(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`vllm-nnrp manifest` is the operator's way to the manifest of a suite run: the same
    file the release and the real-vLLM tests use, per line and embeddings engine."""
    cases = {
        (NEWEST_TESTED, False): manifest_for_vllm(NEWEST_TESTED),
        (NEWEST_TESTED, True): default_manifest_path(),
        (LOWER_BOUND, False): manifest_for_vllm(LOWER_BOUND),
    }
    for (version, embeddings), expected in cases.items():
        code, out, _ = _manifest_command(
            ["--vllm-version", version, *(["--embeddings"] if embeddings else [])], capsys)
        assert code == 0
        assert json.loads(out) == json.loads(expected.read_text()), (version, embeddings)
        assert validate("manifest", json.loads(out)) == []
        names = [op["name"] for op in json.loads(out)["operations"]]
        assert (contract.OP_EMBEDDINGS_CREATE in names) is (embeddings and version == NEWEST_TESTED)
    dest = tmp_path / "adapter.json"
    code, out, err = _manifest_command(["--vllm-version", NEWEST_TESTED, "--out", str(dest)],
                                       capsys)
    assert code == 0 and out == "" and str(dest) in err
    assert dest.read_text() == manifest_for_vllm(NEWEST_TESTED).read_text()


def test_the_manifest_command_says_what_is_wrong(capsys, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    code, out, err = _manifest_command(["--vllm-version", "0.17.0"], capsys)
    assert code == 2 and out == ""
    assert "vLLM 0.17.0 is outside the supported line" in err and "Traceback" not in err
    import vllm_nnrp_adapter.cli as cli
    monkeypatch.setattr(cli, "detect_vllm_version", lambda: None)
    code, out, err = _manifest_command([], capsys)
    assert code == 2 and "no vLLM is installed here: give --vllm-version" in err
    code, out, err = _manifest_command(["--vllm-version", NEWEST_TESTED, "--out",
                                        str(tmp_path / "missing" / "adapter.json")], capsys)
    assert code == 2 and f"cannot write {tmp_path / 'missing' / 'adapter.json'}" in err
