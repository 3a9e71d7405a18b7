"""The soak benchmark's event check names the defect it sees (no wire: the check alone)."""

from __future__ import annotations

import anyio

from nnrp_conformance import contract
from nnrp_conformance.gate.bench_condition import benchmark_own_failures
from nnrp_conformance.gate.evidence import load_document
from vllm_nnrp_adapter.benchmark.lib.results import write_results
from vllm_nnrp_adapter.benchmark.soak import soak
from vllm_nnrp_adapter.benchmark.soak.results import results_for_gate
from vllm_nnrp_adapter.profile.mapping import ChunkMapper

TEXT = soak._expected("text", 4)


def test_exact_events_with_contiguous_sequences_pass() -> None:
    assert soak._classify(TEXT, TEXT, [1, 2, 3, 4, 5]) == ""


def test_each_defect_is_named() -> None:
    assert soak._classify(TEXT[:-1], TEXT, [1, 2, 3, 4]) == "lost"
    assert soak._classify(TEXT, TEXT, [1, 2, 4, 5, 6]) == "lost"  # a sequence gap
    assert soak._classify([*TEXT, TEXT[0]], TEXT, [1, 2, 3, 4, 5, 6]) == "duplicated"
    assert soak._classify(TEXT, TEXT, [1, 2, 2, 3, 4]) == "duplicated"
    swapped = [TEXT[1], TEXT[0], *TEXT[2:]]
    assert soak._classify(swapped, TEXT, [1, 2, 3, 4, 5]) == "misordered"
    assert soak._classify(TEXT, TEXT, [2, 1, 3, 4, 5]) == "misordered"


def test_expectations_match_what_the_mapper_makes_of_the_synthetic_chunks() -> None:
    # the soak's expectation per kind is the adapter's real mapping of its backend's chunks
    backend = soak.SyntheticBackend(tokens=5)

    async def mapped(tools: bool) -> list[tuple[str, str]]:
        mapper = ChunkMapper()
        events = [e async for c in backend._stream("r1", tools) for e in mapper.map_chunk(c.data)]
        events += mapper.finish()
        return [soak._key(e) for e in events if e["type"] not in contract.TERMINAL_EVENT_TYPES]

    assert anyio.run(mapped, False) == soak._expected("text", 5)
    assert anyio.run(mapped, True) == soak._expected("tools", 5)
    assert not backend.unfinished


def test_the_mix_is_six_text_one_each_other_kind() -> None:
    kinds = [soak._kind(i) for i in range(10)]
    assert kinds.count("text") == 6
    assert {k for k in kinds if k != "text"} == {"cancelled", "non_streaming", "tools", "malformed"}
    assert isinstance(soak._envelope(9), bytes)


def _small_run(name: str) -> dict:
    """A real soak run of 300 operations on 8 sessions (server and client in this process)."""
    args = soak.build_parser().parse_args(["--name", name, "--sessions", "8", "--ops", "300",
                                           "--warmup", "100", "--in-process"])
    return anyio.run(soak._soak, args, backend="asyncio")


def test_a_clean_run_is_a_gate_document_the_gate_passes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    doc = _small_run("load")
    assert doc["clean"], doc["problems"]
    path = write_results(results_for_gate(doc, "load"), tmp_path / "load.json")
    loaded = load_document(path, "benchmark-results")
    assert loaded.ok, loaded.problems
    assert loaded.data["parameters"]["events_verdict"] == "pass"
    assert "rss_verdict" not in loaded.data["parameters"]  # the load run judges events only
    assert {m["name"] for m in loaded.data["metrics"]} == {"load.ops_per_s", "load.server_rss_mib"}
    assert benchmark_own_failures(loaded) == []


def test_a_lost_event_or_a_growing_server_fails_the_gate(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a real run's document with one verdict broken at a time: the base is made clean and
    # flat, since a 300-operation run's own RSS may wander on a loaded machine (what this
    # test proves is the gate's reading of each verdict, not that run's memory)
    doc = {**_small_run("soak"), "lost": 0, "clean": True, "flat_within_10_percent": True}
    lost = {**doc, "lost": 1, "clean": False}
    grown = {**doc, "flat_within_10_percent": False}
    for bad, key in ((lost, "events_verdict"), (grown, "rss_verdict")):
        path = write_results(results_for_gate(bad, "soak"), tmp_path / f"{key}.json")
        failures = benchmark_own_failures(load_document(path, "benchmark-results"))
        assert failures == [f"{path}: the benchmark's own verdict {key} is 'fail'"]
