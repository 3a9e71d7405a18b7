"""``nnrp-conformance init`` against the example endpoint over loopback; its derivation rules."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.cli import build_parser
from nnrp_conformance.commands import init
from nnrp_conformance.manifest import load_manifest

CAPS = {
    "adapter": "acme-endpoint",
    "profile": contract.PROFILE,
    "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1],
    "operations": [{"name": contract.OP_CHAT_COMPLETIONS_CREATE, "streaming": True,
                    "non_streaming": True, "tool_calls": False}],
    "models": [{"id": "acme-7b", "owned_by": "acme"}],
}


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="nnrp-conformance")
    init.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["init", *argv])
    return args._command.run(args)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.wire
def test_init_writes_a_valid_manifest_and_a_checklist(
    endpoint: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `endpoint` is the example endpoint fixture of tests/suite/conftest.py
    out = tmp_path / "manifest.json"
    assert _run("--target", endpoint.address, "--out", str(out)) == 0
    manifest = json.loads(out.read_text(encoding="utf-8"))
    assert validation.validate("manifest", manifest) == []
    load_manifest(out)  # the suite itself accepts it
    assert manifest["profile"] == contract.PROFILE
    assert manifest["schema_version"] == contract.SCHEMA_VERSION
    assert [op["name"] for op in manifest["operations"]] == [contract.OP_CHAT_COMPLETIONS_CREATE]
    review = init.review_path(out).read_text(encoding="utf-8")
    for flag in contract.OPERATION_FLAG_CAPABILITIES:
        assert f"- [ ] confirm (/operations/0/{flag}):" in review
    assert f"pytest --nnrp-target {endpoint.address} --manifest {out}" in review
    printed = capsys.readouterr().out
    assert "confirm" in printed and str(out) in printed


@pytest.mark.wire
def test_init_refuses_to_overwrite_without_force(endpoint: Any, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "manifest.json"
    out.write_text("{\"mine\": true}\n", encoding="utf-8")
    assert _run("--target", endpoint.address, "--out", str(out)) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "{\"mine\": true}\n"
    assert not init.review_path(out).exists()
    assert _run("--target", endpoint.address, "--out", str(out), "--force") == 0
    assert validation.validate("manifest", json.loads(out.read_text(encoding="utf-8"))) == []


def test_init_unreachable_target_writes_nothing(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "manifest.json"
    target = f"127.0.0.1:{_closed_port()}"
    assert _run("--target", target, "--out", str(out), "--connect-timeout", "5") == 3
    err = capsys.readouterr().err
    assert "cannot connect" in err and f"nothing listening on {target}" in err
    assert not out.exists() and not init.review_path(out).exists()


def test_init_missing_output_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "nope" / "manifest.json"
    assert _run("--target", "127.0.0.1:9", "--out", str(out)) == 2
    assert "no such directory" in capsys.readouterr().err


def test_cli_registers_init() -> None:
    args = build_parser().parse_args(["init", "--target", "127.0.0.1:9"])
    assert args._command.NAME == "init"
    assert args.out == Path("manifest.json")


def test_derive_marks_unstated_flags_and_keeps_models() -> None:
    manifest, claims = init.derive_manifest(CAPS)
    assert validation.validate("manifest", manifest) == []
    op = manifest["operations"][0]
    assert op["tool_calls"] is False and op["cancellation"] is False
    texts = {c.pointer: c.text for c in claims}
    assert "did not say" in texts["/operations/0/cancellation"]
    assert "did not say" not in texts["/operations/0/tool_calls"]
    assert "capability.not-claimed" not in texts["/operations/0/streaming"]
    assert manifest["models"] == CAPS["models"]
    assert "`acme-7b`" in texts["/models"]


def test_derive_flags_level1_gaps_and_critical_extensions() -> None:
    caps = {**CAPS, "operations": [{**CAPS["operations"][0], "streaming": False}],
            "extensions": [{"name": "acme.trace", "critical": True}]}
    manifest, claims = init.derive_manifest(caps)
    texts = {c.pointer: c.text for c in claims}
    assert "capability.not-claimed" in texts["/operations/0/streaming"]
    assert "--nnrp-extension acme.trace" in texts["/extensions/0"]
    assert manifest["extensions"] == [{"name": "acme.trace", "critical": True}]


def test_the_checklist_says_what_each_flag_does_for_its_own_operation() -> None:
    """Issue 36: a Level 3 operation that does not stream fails nothing; its body is not a
    chat completion; the cancellation claim is the endpoint's own terminal for a cancelled
    frame, not the in-band hint (the suite's reading, non-strict)."""
    ops = [{"name": contract.OP_CHAT_COMPLETIONS_CREATE, "streaming": True,
            "non_streaming": True, "cancellation": True},
           {"name": contract.OP_EMBEDDINGS_CREATE, "streaming": False, "non_streaming": True},
           {"name": contract.OP_RESPONSES_CREATE, "streaming": False, "non_streaming": True}]
    _manifest, claims = init.derive_manifest({**CAPS, "compatibility_levels": [1, 2, 3],
                                              "operations": ops})
    texts = {c.pointer: c.text for c in claims}
    assert "capability.not-claimed" not in texts["/operations/1/streaming"]
    assert "nothing changes" in texts["/operations/1/streaming"]
    assert "Level 2 mandatory recipes of `responses.create`" in texts["/operations/2/streaming"]
    assert "chat.completion" in texts["/operations/0/non_streaming"]
    for i in (1, 2):
        assert "chat.completion" not in texts[f"/operations/{i}/non_streaming"]
    cancel = texts["/operations/0/cancellation"]
    assert "own terminal" in cancel and "not part of this claim" in cancel


def test_derive_needs_an_adapter_name() -> None:
    caps = {k: v for k, v in CAPS.items() if k != "adapter"}
    with pytest.raises(init.InitError, match="--adapter"):
        init.derive_manifest(caps)
    manifest, _ = init.derive_manifest(caps, adapter="given")
    assert manifest["adapter"] == "given"


def test_derive_reports_capability_document_violations_as_fixes() -> None:
    caps = {**CAPS, "models": [], "unexpected": 1}
    _, claims = init.derive_manifest(caps)
    fixes = [c for c in claims if c.kind == "fix"]
    assert any("unexpected" in c.text for c in fixes)
    assert any(c.pointer == "/models" for c in fixes)
    review = init.review_markdown(Path("m.json"), "127.0.0.1:1", claims)
    assert review.index("## Fix first") < review.index("## Confirm")


def test_derive_refuses_a_document_without_operations() -> None:
    with pytest.raises(init.InitError, match="operations") as info:
        init.derive_manifest({**CAPS, "operations": []})
    assert info.value.exit_code == 3


def test_init_from_a_capability_file_needs_no_discovery(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27 item 7: the discovery operation is recommended, not required; an endpoint
    without it starts from its document as a file."""
    doc = tmp_path / "capabilities.json"
    doc.write_text(json.dumps(CAPS), encoding="utf-8")
    out = tmp_path / "manifest.json"
    assert _run("--capabilities", str(doc), "--out", str(out)) == 0
    manifest = json.loads(out.read_text(encoding="utf-8"))
    assert validation.validate("manifest", manifest) == []
    assert manifest["adapter"] == "acme-endpoint" and manifest["models"][0]["id"] == "acme-7b"
    review = init.review_path(out).read_text(encoding="utf-8")
    assert f"from the file `{doc}`" in review
    assert f"--nnrp-capabilities {doc}" in capsys.readouterr().out
    # errors name the file; nothing at all to read is a usage error that says what to give
    assert _run("--capabilities", str(tmp_path / "nope.json"), "--out", str(out),
                "--force") == contract.EXIT_USAGE
    assert "nope.json: no such file" in capsys.readouterr().err
    assert _run("--out", str(tmp_path / "m2.json")) == contract.EXIT_USAGE
    assert "--capabilities FILE" in capsys.readouterr().err
