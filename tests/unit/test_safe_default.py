"""The adapter's safe default (security.py): no listener reachable from other hosts without TLS
and an API key unless ``--nnrp-allow-insecure``. The command runs in a subprocess of this
(development) environment, which has no vLLM: the refusal must come before vLLM is imported,
naming the flag that overrides it; where it is allowed, the command gets past it (to vLLM's
absence)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vllm_nnrp_adapter.launch.security import (
    Security,
    TlsError,
    TlsFiles,
    from_vllm_args,
    from_vllm_argv,
    insecure_listen_problem,
    is_local,
)

TLS = TlsFiles(Path("c.pem"), Path("k.pem"))


def serve(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_nnrp_adapter.cli", "serve", *argv],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=env)


@pytest.fixture
def model(tmp_path: Path) -> str:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    return str(tmp_path)


TLS_WORDS = "TLS (a tcp+tls://, quic+tls:// or wss:// address, with --ssl-certfile and " \
    "--ssl-keyfile)"


@pytest.mark.parametrize(("listen", "extra", "lacking"), [
    ("0.0.0.0:4999", [], f"without {TLS_WORDS} and an API key"),
    ("0.0.0.0:4999", ["--api-key", "k"], f"without {TLS_WORDS}:"),
    # TLS files do not make a plaintext address TLS
    ("0.0.0.0:4999", ["--api-key", "k", "--ssl-certfile", "c.pem", "--ssl-keyfile", "k.pem"],
     f"without {TLS_WORDS}:"),
    ("quic+tls://0.0.0.0:4999", ["--ssl-certfile", "c.pem", "--ssl-keyfile", "k.pem"],
     "without an API key"),
])
def test_a_public_listener_without_tls_and_key_is_refused(
    model: str, listen: str, extra: list[str], lacking: str
) -> None:
    proc = serve(model, "--nnrp-listen", listen, *extra)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"vllm-nnrp serve: error: refusing to listen on {listen}")
    assert lacking in proc.stderr and "--nnrp-allow-insecure" in proc.stderr
    assert "Traceback" not in proc.stderr and "k.pem" not in proc.stdout
    assert "'k'" not in proc.stderr  # the key is never repeated


def test_allow_insecure_gets_past_the_safe_default(model: str) -> None:
    proc = serve(model, "--nnrp-listen", "0.0.0.0:4999", "--nnrp-allow-insecure")
    assert "refusing to listen" not in proc.stderr
    assert proc.returncode != 0  # no vLLM in this environment: it stops there


def test_a_tls_address_without_a_certificate_is_refused(model: str) -> None:
    proc = serve(model, "--nnrp-listen", "wss://127.0.0.1:0/nnrp")
    assert proc.returncode == 2
    assert "wss://127.0.0.1:0/nnrp is a TLS address: give the certificate" in proc.stderr


def test_half_a_tls_pair_is_refused(model: str) -> None:
    proc = serve(model, "--nnrp-listen", "127.0.0.1:0", "--ssl-certfile", "c.pem")
    assert proc.returncode == 2
    assert "--ssl-certfile needs --ssl-keyfile too" in proc.stderr


@pytest.mark.parametrize(("address", "local"), [
    ("127.0.0.1:1", True), ("[::1]:1", True), ("localhost:1", True), ("ipc:///tmp/x.sock", True),
    ("ws://127.0.0.2:1/nnrp", True), ("0.0.0.0:1", False), ("[::]:1", False),
    ("10.1.2.3:1", False), ("example.com:1", False),
])
def test_what_counts_as_local(address: str, local: bool) -> None:
    assert is_local(address) is local


def test_the_rule_itself() -> None:
    public = ["tcp+tls://0.0.0.0:1"]
    assert insecure_listen_problem(public, Security(("k",), TLS), False) is None
    assert insecure_listen_problem(["0.0.0.0:1"], Security(("k",), TLS), False) is not None
    assert insecure_listen_problem(public, Security(), True) is None
    assert insecure_listen_problem(["127.0.0.1:1", None], Security(), False) is None
    problem = insecure_listen_problem(["127.0.0.1:1", "0.0.0.0:2"], Security(), False)
    assert problem is not None and "0.0.0.0:2" in problem and "127.0.0.1" not in problem


def test_keys_follow_vllms_rule() -> None:
    class Args:
        api_key: list[str] | None = None
        ssl_certfile = ssl_keyfile = None

    args = Args()
    assert from_vllm_args(args, {}).api_keys == ()
    assert from_vllm_args(args, {"VLLM_API_KEY": "env"}).api_keys == ("env",)
    args.api_key = ["a", "", "b"]
    assert from_vllm_args(args, {"VLLM_API_KEY": "env"}).api_keys == ("a", "b")  # flag wins
    assert from_vllm_argv(["--api-key", "a"], {}).api_keys == ("a",)
    assert from_vllm_argv([], {"VLLM_API_KEY": ""}).api_keys == ()
    assert "a" not in repr(from_vllm_args(args, {}))


def test_bad_tls_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("not pem", encoding="utf-8")
    with pytest.raises(TlsError, match=r"--ssl-certfile .*c\.pem: not a PEM certificate"):
        TlsFiles(tmp_path / "c.pem", tmp_path / "k.pem").der()
    with pytest.raises(TlsError, match=r"--ssl-certfile .*missing\.pem: No such file"):
        TlsFiles(tmp_path / "missing.pem", tmp_path / "k.pem").der()
