"""Recipe loading: bundled recipes, JSON and YAML, and errors that name file and field."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.checks import NAMED_CHECKS
from nnrp_conformance.recipes import (
    RecipeError,
    bundled_recipes_dir,
    load_recipe_file,
    load_recipes,
)

UPSTREAM = Path(__file__).parent / "data" / "upstream"


def _minimal(**over: object) -> dict:
    doc = {
        "id": "t.minimal",
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "request": {"body": {"model": "${MODEL_ID}", "messages": []}},
        "expect": {"events": [{"type": contract.EV_OUTPUT_TEXT_DELTA}], "terminal": "success"},
    }
    doc.update(over)
    return doc


def test_bundled_recipes_load_and_cover_the_ten_level1_cases() -> None:
    recipes = load_recipes()
    ids = {r.id for r in recipes}
    assert bundled_recipes_dir().is_dir()
    for needed in (
        "level1.chat.streaming-text",
        "level1.chat.non-streaming-body",
        "level1.chat.invalid-body.missing-messages",
        "level1.chat.invalid-body.messages-not-array",
        "level1.envelope.wrong-schema-version",
        "level1.envelope.missing-body",
        "level1.wire.non-utf8-payload",
        "level1.wire.invalid-json",
        "level1.chat.unsupported-operation",
        "level1.chat.usage-shape",
        "level1.chat.text-delta-ordering",
        "level1.chat.tool-call-forced",
        "level1.chat.cancel.client",
        "level1.chat.cancel.in-band-hint",
        "level1.chat.backend-error",
        "level1.capabilities.document",
    ):
        assert needed in ids
    for name in ("streaming-text", "non-streaming", "invalid-body", "unsupported-operation",
                 "usage", "tool-call-delta", "cancellation", "backend-error"):
        assert f"openai-compatible.chat.{name}" in ids
    # each recipe's level is its id's and its folder's (recipes/levelN/, upstream's are Level 1)
    for r in recipes:
        level = int(r.id[5]) if r.id.startswith("level") else contract.LEVEL_CHAT
        assert r.level == level, r.id
        assert r.path.parent.name in (f"level{level}", "upstream"), r.path
    assert all(r.rule for r in recipes if r.id.startswith("level"))


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_bundled_upstream_recipes_are_byte_identical_to_upstream() -> None:
    """recipes/upstream/UPSTREAM records upstream's commit and each file's git blob id
    (``git ls-tree`` lines); every bundled upstream recipe, and the test data copies, must
    hash to them: a drifted byte fails here (a change ships as our own recipe instead)."""
    bundled = bundled_recipes_dir() / "upstream"
    lines = (bundled / "UPSTREAM").read_text(encoding="utf-8").splitlines()
    assert any(re.fullmatch(r"commit [0-9a-f]{40}", line) for line in lines)
    blobs = {}
    for line in lines:
        m = re.fullmatch(r"100644 blob ([0-9a-f]{40})\t\S+/(chat-[a-z-]+\.json)", line)
        if m:
            blobs[m.group(2)] = m.group(1)
    assert sorted(blobs) == sorted(p.name for p in bundled.glob("*.json"))
    assert len(blobs) == 8
    for name, blob in blobs.items():
        assert _git_blob_id((bundled / name).read_bytes()) == blob, f"{name} drifted"
        assert _git_blob_id((UPSTREAM / name).read_bytes()) == blob, f"test copy {name}"


def test_status_and_capabilities_of_bundled_recipes() -> None:
    by_id = {r.id: r for r in load_recipes()}
    optional = {rid for rid, r in by_id.items() if r.status == contract.STATUS_OPTIONAL}
    assert optional == {
        "openai-compatible.chat.tool-call-delta", "openai-compatible.chat.cancellation",
        "level1.chat.tool-call-forced", "level1.chat.cancel.client",
        "level1.chat.cancel.in-band-hint", "level1.chat.timeout",
        "level1.concurrent.chat-cancel-one",
        "level2.responses.cancel.client", "level2.responses.cancel.in-band-hint",
        "level2.responses.timeout",
    }
    for rid in optional:
        caps = by_id[rid].required_capabilities
        assert contract.CAP_TOOL_CALLS in caps or contract.CAP_CANCELLATION in caps
    assert by_id["level1.capabilities.document"].operation == contract.OP_CAPABILITIES_GET
    assert by_id["level1.capabilities.document"].checks == ("capability-document",)
    assert by_id["level1.chat.cancel.client"].data["request"]["cancel"] == {"after_events": 1}


def test_bundled_recipes_use_only_contract_codes_and_reasons() -> None:
    for r in load_recipes():
        for entry in r.data["expect"]["events"]:
            err = (entry.get("fields") or {}).get("error")
            if err:
                assert err["code"] in contract.ERROR_CODES, r.id
                if "type" in err:
                    assert err["type"] == contract.ERROR_CODES[err["code"]], r.id
            reason = (entry.get("fields") or {}).get("reason")
            if reason:
                assert reason in contract.CANCEL_SOURCES, r.id


def test_upstream_unsupported_operation_is_level1() -> None:
    r = load_recipe_file(UPSTREAM / "chat-unsupported-operation.json")
    assert r.operation == contract.OP_RESPONSES_CREATE
    assert r.level == contract.LEVEL_CHAT  # it requires api.level1


def test_json_and_yaml_load_alike(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_minimal(id="t.json")))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yaml").write_text(
        "id: t.yaml\nprofile: openai-compatible\nschema_version: openai-compatible/1\n"
        "operation: chat.completions.create\nstatus: optional\nlevel: 1\n"
        "rule: spec §4\nrequest:\n  body: {stream: true}\n"
        "expect:\n  events:\n    - {type: response.output_text.delta, max_count: 3}\n"
        "  terminal: success\n")
    (tmp_path / "notes.txt").write_text("ignored")
    recipes = load_recipes([tmp_path])
    assert [r.id for r in recipes] == ["t.json", "t.yaml"]
    y = recipes[1]
    assert (y.status, y.rule, y.level) == ("optional", "spec §4", 1)
    assert load_recipes([tmp_path / "a.json"])[0].status == contract.STATUS_MANDATORY


def test_schema_errors_name_file_and_field(tmp_path: Path) -> None:
    bad = _minimal()
    bad["expect"]["events"][0]["min_cout"] = 1  # upstream silently ignores this typo
    bad["status"] = "required"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    with pytest.raises(RecipeError) as info:
        load_recipes([f])
    text = str(info.value)
    assert f"{f}: /expect/events/0/min_cout:" in text
    assert f"{f}: /status:" in text
    assert len(info.value.problems) == 2
    assert info.value.path == f


def test_every_file_is_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text("id: [unclosed\n")
    (tmp_path / "two.json").write_text(json.dumps(_minimal(profile="other")))
    (tmp_path / "three.yml").write_text("- a list\n")
    with pytest.raises(RecipeError) as info:
        load_recipes([tmp_path])
    lines = str(info.value).splitlines()
    assert any(ln.startswith(f"{tmp_path / 'one.yaml'}: /: invalid YAML at line") for ln in lines)
    assert any(ln.startswith(f"{tmp_path / 'two.json'}: /profile:") for ln in lines)
    assert any("three.yml: /: a recipe must be a mapping/object, got list" in ln for ln in lines)


def test_invalid_json_reports_line(tmp_path: Path) -> None:
    f = tmp_path / "x.json"
    f.write_text('{\n  "id": "a",\n  oops\n}')
    with pytest.raises(RecipeError, match=r"x\.json: /: invalid JSON at line 3"):
        load_recipes([f])


def test_duplicate_ids_name_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_minimal(id="dup")))
    (tmp_path / "b.json").write_text(json.dumps(_minimal(id="dup")))
    with pytest.raises(RecipeError) as info:
        load_recipes([tmp_path])
    assert str(info.value) == (f"{tmp_path / 'b.json'}: /id: duplicate recipe id 'dup' "
                               f"(also defined in {tmp_path / 'a.json'})")


def test_same_file_twice_is_loaded_once(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_minimal()))
    assert len(load_recipes([tmp_path, tmp_path / "a.json"])) == 1


def test_unknown_check_and_contradicting_counts(tmp_path: Path) -> None:
    unknown = _minimal(checks=["no-such-check"])
    counts = _minimal()
    counts["expect"]["events"][0].update(min_count=3, max_count=1)
    (tmp_path / "c.json").write_text(json.dumps(unknown))
    (tmp_path / "d.json").write_text(json.dumps(counts))
    with pytest.raises(RecipeError) as info:
        load_recipes([tmp_path])
    text = str(info.value)
    # the legal names are data of recipe.schema.json: the schema names them
    assert "c.json: /checks/0" in text and '"no-such-check"' in text and '"usage-shape"' in text
    assert "d.json: /expect/events/0/max_count" in text


def test_the_schema_lists_exactly_the_named_checks() -> None:
    schema = validation.load_schema("recipe")
    assert sorted(schema["properties"]["checks"]["items"]["enum"]) == sorted(NAMED_CHECKS)


def test_missing_path_and_empty_dir(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="no such file or directory"):
        load_recipes([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecipeError, match="contains no recipe files"):
        load_recipes([tmp_path / "empty"])
