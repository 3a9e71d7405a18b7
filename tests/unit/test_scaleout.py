"""Each of vLLM's API servers gets its own NNRP address by one rule (scaleout.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from vllm_nnrp_adapter.launch.scaleout import (
    ScaleOutError,
    api_server_rank,
    config_for_rank,
    explicit_path_problem,
    listen_for_rank,
)
from vllm_nnrp_adapter.launch.settings import ServeConfig


@pytest.mark.parametrize(("listen", "rank", "expected"), [
    ("127.0.0.1:4433", 0, "127.0.0.1:4433"),
    ("127.0.0.1:4433", 1, "127.0.0.1:4434"),
    ("0.0.0.0:4433", 3, "0.0.0.0:4436"),
    ("tcp://127.0.0.1:4433", 2, "tcp://127.0.0.1:4435"),
    ("[::1]:4433", 1, "[::1]:4434"),
    ("ws://127.0.0.1:8080/nnrp", 1, "ws://127.0.0.1:8081/nnrp"),
    ("ipc:///run/nnrp.sock", 1, "ipc:///run/nnrp.1.sock"),
    ("unix:///run/nnrp.sock", 2, "unix:///run/nnrp.2.sock"),
    ("127.0.0.1:0", 1, "127.0.0.1:0"),  # each picks a free port; the ready file says which
])
def test_listen_address_per_api_server(listen: str, rank: int, expected: str) -> None:
    assert listen_for_rank(listen, rank) == expected


def test_a_port_beyond_the_range_is_refused() -> None:
    with pytest.raises(ScaleOutError, match="port 65536, beyond 65535"):
        listen_for_rank("127.0.0.1:65535", 1)


def test_ready_file_and_metrics_port_follow_the_rank() -> None:
    config = ServeConfig([], listen="127.0.0.1:4433", ready_file=Path("/tmp/r/ready.json"),
                         metrics_port=9400)
    assert config_for_rank(config, 0, 1) is config
    first, second = config_for_rank(config, 0, 2), config_for_rank(config, 1, 2)
    assert (first.listen, first.ready_file, first.metrics_port) == (
        "127.0.0.1:4433", Path("/tmp/r/ready.json"), 9400)
    assert (second.listen, second.ready_file, second.metrics_port) == (
        "127.0.0.1:4434", Path("/tmp/r/ready.1.json"), 9401)
    assert (second.api_server_rank, second.api_server_count) == (1, 2)


def _state(asked: int | None, rank: object = None, count: object = None) -> SimpleNamespace:
    parallel = SimpleNamespace(_api_process_rank=rank, _api_process_count=count)
    return SimpleNamespace(args=SimpleNamespace(api_server_count=asked),
                           engine_client=SimpleNamespace(
                               vllm_config=SimpleNamespace(parallel_config=parallel)))


def test_rank_comes_from_the_engine_clients_config() -> None:
    assert api_server_rank(_state(2, 1, 2)) == (1, 2)
    assert api_server_rank(_state(None, 0, 1)) == (0, 1)
    assert api_server_rank(SimpleNamespace()) == (0, 1)  # a single API server
    with pytest.raises(ScaleOutError, match="--api-server-count 2, but this API server's rank"):
        api_server_rank(_state(2))
    with pytest.raises(ScaleOutError):
        api_server_rank(_state(2, 2, 2))  # a rank outside the count is not trusted


@pytest.mark.parametrize(("argv", "named"), [
    (["--api-server-count", "2"], "--api-server-count 2: vllm-nnrp serve is one process"),
    (["--api-server-count=4"], "--api-server-count 4"),
    (["-asc", "2"], "--api-server-count 2"),
    (["--headless", "--data-parallel-size", "2"], "--headless runs engines without an API server"),
])
def test_the_explicit_path_refuses_what_only_vllm_serve_can_start(argv: list[str],
                                                                  named: str) -> None:
    problem = explicit_path_problem(["--model", "/m", *argv])
    assert problem is not None and named in problem
    assert "vllm_nnrp_adapter.vllm_plugin.NnrpServing" in problem  # says what to run instead


def test_the_explicit_path_takes_one_api_server() -> None:
    assert explicit_path_problem(["--model", "/m", "--api-server-count", "1"]) is None
    assert explicit_path_problem(["--model", "/m"]) is None


def test_vllm_nnrp_serve_says_it_before_the_engine_starts(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_nnrp_adapter.cli import cmd_serve

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert cmd_serve(["--model", str(model), "--api-server-count", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vllm-nnrp serve: error: --api-server-count 2:"), err
