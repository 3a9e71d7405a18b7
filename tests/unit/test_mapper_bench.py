"""The mapper benchmark measures the adapter's real path and writes a gate-ready document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnrp_conformance import validation
from nnrp_conformance.wire import codec
from vllm_nnrp_adapter.benchmark import mapper
from vllm_nnrp_adapter.benchmark.lib import results
from vllm_nnrp_adapter.benchmark.lib.results import BENCH_MAPPER, required_metrics
from vllm_nnrp_adapter.profile.mapping import ChunkMapper

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"


def test_sse_line_round_trips_through_the_backend_parser() -> None:
    line = mapper.sse_line(mapper.LITERAL_CHUNK)
    assert line.startswith("data: {") and line.endswith("\n\n")
    (payload,) = mapper.parse_sse(line)
    assert json.loads(payload) == mapper.LITERAL_CHUNK


def test_mapped_bytes_are_what_the_server_sends() -> None:
    chunks, _ = mapper.load_chunks(None)
    lines = [mapper.sse_line(c) for c in chunks]
    _, events, nbytes = mapper.run_mapper([lines])
    reference = ChunkMapper()
    expected = [codec.encode_event(e) for c in chunks for e in reference.map_chunk(c)]
    assert events == len(expected) >= len(chunks)
    assert nbytes == sum(len(b) for b in expected)
    assert all(json.loads(b)["type"] == "response.output_text.delta" for b in expected)


def test_floor_is_parse_plus_serialise_of_the_same_chunk() -> None:
    line = mapper.sse_line(mapper.LITERAL_CHUNK)
    payloads = {line: mapper.parse_sse(line)[0]}
    _, nbytes = mapper.run_floor([[line]], payloads)
    assert nbytes == len(payloads[line].encode())


@pytest.mark.skipif(not any(FIXTURES.glob("*/stream_text.json")), reason="no recorded fixtures")
def test_recorded_fixtures_are_used_when_present() -> None:
    chunks, source = mapper.load_chunks(None)
    assert source.endswith("stream_text.json")
    assert all(any(ch["delta"].get("content") for ch in c["choices"]) for c in chunks)


def test_a_bad_fixture_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "stream_text.json"
    bad.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(SystemExit, match="cannot read fixture"):
        mapper.load_chunks(bad)
    bad.write_text("[]", encoding="utf-8")
    with pytest.raises(SystemExit, match="no streamed content chunks"):
        mapper.load_chunks(bad)


def test_main_writes_a_schema_valid_document_with_the_gate_metrics(tmp_path: Path) -> None:
    out = tmp_path / "mapper.json"
    assert mapper.main(["--count", "640", "--repeats", "5", "--json", str(out)]) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert validation.validate("benchmark-results", doc) == []
    assert doc["name"] == BENCH_MAPPER
    required = required_metrics(BENCH_MAPPER)
    assert set(required) <= {m["name"] for m in doc["metrics"]}
    assert all(m["samples"] == 5 for m in doc["metrics"])
    assert doc["ratios"][0]["name"] == "mapper_cost_over_floor"
    assert doc["versions"]["vllm"] is None and doc["machine"]["cores"] >= 1


def test_main_refuses_too_few_repeats(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        mapper.main(["--repeats", "3", "--json", str(tmp_path / "x.json")])


def test_percentiles_and_metric_summary() -> None:
    values = [float(v) for v in range(1, 101)]
    assert results.percentile(values, 50) == pytest.approx(50.5)
    assert results.percentile(values, 95) == pytest.approx(95.05)
    assert results.median([3.0, 1.0, 2.0]) == 2.0
    m = results.metric("x", "ms", values)
    assert (m["min"], m["max"], m["samples"]) == (1.0, 100.0, 100)
    with pytest.raises(results.BenchmarkError):
        results.metric("x", "ms", [])


def test_results_document_refuses_schema_breaks() -> None:
    with pytest.raises(results.BenchmarkError, match="benchmark-results schema"):
        results.results_document("x", [{"name": "m", "unit": "ms"}], runs=1)
