"""The suite's API key reaches RunOptions from either spelling, or from NNRP_API_KEY, and is
never shown by the options' repr (which reports and errors may print)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnrp_conformance.cli import build_parser
from nnrp_conformance.commands._options import options_from_args
from nnrp_conformance.options import API_KEY_ENV, RunOptions
from nnrp_conformance.reproduce import reproduce_command

BASE = ["run", "--target", "127.0.0.1:1", "--manifest", "m.json"]


@pytest.mark.parametrize("flag", ["--api-key", "--nnrp-api-key"])
def test_the_option_gives_the_key(flag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    options = options_from_args(build_parser().parse_args([*BASE, flag, "from-flag"]))
    assert options.api_key == "from-flag"
    assert "from-flag" not in repr(options)


def test_the_variable_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert options_from_args(build_parser().parse_args(BASE)).api_key == "from-env"
    monkeypatch.setenv(API_KEY_ENV, "")
    assert options_from_args(build_parser().parse_args(BASE)).api_key is None


def test_a_reproduction_command_keeps_tls_and_leaves_the_key_out(tmp_path: Path) -> None:
    options = RunOptions(target="quic+tls://127.0.0.1:1", manifest=tmp_path / "m.json",
                         api_key="never-printed", tls_ca=Path("ca.pem"),
                         tls_server_name="svc", base_dir=tmp_path)
    command = reproduce_command(options, tmp_path / "r.json", "case", None)
    assert f"--tls-ca {tmp_path / 'ca.pem'}" in command and "--tls-server-name svc" in command
    assert "never-printed" not in command
