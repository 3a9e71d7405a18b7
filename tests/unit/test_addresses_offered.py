"""Plain QUIC is not offered, because it cannot work (issue 43 item 6): nnrp-py's QUIC carrier
needs TLS. Since issue 44 both sides take TLS options, so ``quic+tls://`` (and ``wss://``,
``tcp+tls://``) are offered; a bare ``quic://`` address is refused by name, with that reason
and the way to TLS, by the one address parser both sides use: the suite's run stops before
connecting, ``vllm-nnrp serve`` and the plugin path before vLLM starts. No help text or page
offers it.

Before, ``quic://`` was offered by ``vllm-nnrp serve --help``, the operator guide and the
quickstart, and failed inside nnrp-py ("forced native transport quic rejected:
security-unsatisfied"), for the explicit path only once vLLM's engine had started.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nnrp_conformance.wire.pump import AddressError, parse_address
from vllm_nnrp_adapter import cli
from vllm_nnrp_adapter.launch.settings import SETTINGS
from vllm_nnrp_adapter.launch.vllm_plugin import (
    ENV_LISTEN,
    PluginSettingsError,
    settings_from_environ,
)

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "docs" / "examples" / "minimal_endpoint" / "manifest.json"
REFUSED = ["quic://127.0.0.1:4433", "QUIC://[::1]:4433"]


def _says_why(message: str) -> None:
    assert "refused: nnrp-py's QUIC carrier needs TLS (quic+tls://" in message, message
    assert "use tcp, ipc/unix or ws; with TLS quic+tls, wss or tcp+tls" in message, message


@pytest.mark.parametrize("address", ["quic+tls://127.0.0.1:4433", "wss://127.0.0.1:8443/nnrp",
                                     "tcp+tls://[::1]:4433"])
def test_the_tls_schemes_parse(address: str) -> None:
    endpoint = parse_address(address)
    assert endpoint.secure and endpoint.port in (4433, 8443)


@pytest.mark.parametrize("address", REFUSED)
def test_the_address_parser_refuses_quic_and_says_why(address: str) -> None:
    with pytest.raises(AddressError) as caught:
        parse_address(address)
    _says_why(str(caught.value))


def test_the_suite_refuses_a_quic_target_before_connecting(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target",
         "quic://127.0.0.1:4433", "--manifest", str(MANIFEST), "--results", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode not in (0, 1), done  # a setup error, not a verdict
    assert "Traceback" not in done.stderr and "security-unsatisfied" not in done.stderr
    _says_why(done.stderr)
    assert not (tmp_path / "r.json").exists()


def test_vllm_nnrp_serve_refuses_a_quic_listen_address_before_vllm_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--nnrp-listen", "quic://127.0.0.1:4433", "some-model"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --nnrp-listen" in err
    _says_why(err)


def test_the_plugin_path_refuses_a_quic_listen_address() -> None:
    with pytest.raises(PluginSettingsError, match=ENV_LISTEN) as caught:
        settings_from_environ({ENV_LISTEN: "quic://127.0.0.1:4433"})
    _says_why(str(caught.value))


def _schemes(text: str) -> set[str]:
    return {s.lower() for s in re.findall(r"([A-Za-z][\w+]*)://", text)}


def test_every_scheme_a_help_text_offers_is_one_the_parser_takes() -> None:
    """The adapter's listen settings and the suite's target options name only schemes that
    parse (the suite's said nnrp://, which no transport has)."""
    from nnrp_conformance import plugin_options
    from nnrp_conformance.commands import _options

    texts = [s.help for s in SETTINGS if s.name in ("listen", "also-listen")]
    texts += re.findall(r'help="([^"]*(?:"\s*"[^"]*)*)"',
                        Path(_options.__file__).read_text(encoding="utf-8"))
    texts += [Path(plugin_options.__file__).read_text(encoding="utf-8")]
    offered = set().union(*(_schemes(t) for t in texts))
    assert {"tcp", "ipc", "ws"} <= offered
    for scheme in offered:
        address = f"{scheme}:///tmp/x.sock" if scheme in ("ipc", "unix") else \
            f"{scheme}://127.0.0.1:4433"
        parse_address(address)  # raises on a scheme that is not offered


def test_no_page_offers_quic_without_saying_it_is_refused() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = re.sub(r"\s+", " ", page.read_text(encoding="utf-8"))
        for part in re.split(r"(?<=\.) |\| \|", text):  # sentences, table rows
            if "quic://" in part.lower():
                assert re.search(r"refused|not offered", part), (page.name, part)
