"""Pure helpers of the real-vLLM benchmarks (no vLLM, no wire): statistics, chunked SSE
parsing, cancellation summaries and the smoke documents the release gate re-judges."""

from __future__ import annotations

import json

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.gate.requirements import load_policy
from nnrp_conformance.gate.smoke import sequence_problems
from vllm_nnrp_adapter.benchmark.latency import vllm as bench
from vllm_nnrp_adapter.benchmark.lib import results
from vllm_nnrp_adapter.benchmark.lib.results import (
    BENCH_CANCELLATION_LATENCY,
    BENCH_PARITY,
    BENCH_STREAMING_LATENCY,
    BenchmarkError,
    percentile,
)
from vllm_nnrp_adapter.benchmark.parity import parity
from vllm_nnrp_adapter.benchmark.parity.facts import NNRP_SUITE
from vllm_nnrp_adapter.benchmark.soak import results as soak_results
from vllm_nnrp_adapter.profile.policy import policy_path

# --- statistics -----------------------------------------------------------------------------


def test_percentile_interpolates_like_numpy() -> None:
    values = [10.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 100) == 10.0
    assert percentile(values, 95) == pytest.approx(4.0 + 0.8 * 6.0)
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(BenchmarkError):
        percentile([], 50)


def test_gaps_are_milliseconds_between_neighbours() -> None:
    assert bench.gaps_ms([0, 1_000_000, 4_000_000]) == [1.0, 3.0]
    assert bench.gaps_ms([5]) == []


def test_required_metric_names_come_from_the_release_policy() -> None:
    by_name = {b.name: b.metrics for b in load_policy(policy_path()).benchmarks}
    assert by_name[BENCH_STREAMING_LATENCY] == (bench.TTFT_METRIC, bench.INTER_EVENT_METRIC)
    assert by_name[BENCH_CANCELLATION_LATENCY] == (bench.CANCEL_METRIC,)
    assert by_name[BENCH_PARITY] == (parity.NNRP_TPS, parity.HTTP_TPS)
    for name in (results.BENCH_SOAK, results.BENCH_LOAD):
        assert by_name[name] == (soak_results.OPS_PER_S[name], soak_results.SERVER_RSS[name])
    # every benchmark the policy requires is one the adapter's benchmarks write
    written = {getattr(results, n) for n in dir(results) if n.startswith("BENCH_")}
    assert set(by_name) == written
    with pytest.raises(KeyError, match="no-such-benchmark"):
        results.required_metrics("no-such-benchmark")


# --- HTTP chunked transfer + SSE --------------------------------------------------------------


def _chunked(payload: bytes, sizes: list[int]) -> bytes:
    out, at = b"", 0
    for size in sizes:
        piece = payload[at : at + size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        at += size
    return out + b"0\r\n\r\n"


def _sse(*datas: str) -> bytes:
    return b"".join(f"data: {d}\n\n".encode() for d in datas)


def test_chunked_decoder_and_sse_parser_survive_any_split() -> None:
    chunks = [json.dumps({"choices": [{"delta": {"content": c}}]}) for c in ("he", "llo", "é")]
    usage = json.dumps({"choices": [], "usage": {"completion_tokens": 3}})
    payload = _sse(*chunks, usage, "[DONE]")
    wire = _chunked(payload, [7, 50, 3, len(payload)])
    for step in (1, 2, 5, 64, len(wire)):
        dec, sse = parity.ChunkedDecoder(), parity.SseParser()
        events: list[str] = []
        for i in range(0, len(wire), step):
            events += sse.feed(dec.feed(wire[i : i + step]))
        assert dec.done
        assert events == [*chunks, usage, "[DONE]"]


def test_sse_parser_joins_multiline_data_and_ignores_comments() -> None:
    sse = parity.SseParser()
    assert sse.feed(b": keep-alive\r\n\r\ndata: a\r\ndata: b\r\n\r\ndata:c\n") == ["a\nb"]
    assert sse.feed(b"\n") == ["c"]


def test_chunked_decoder_rejects_a_bad_size_line() -> None:
    with pytest.raises(ValueError, match="bad chunk size"):
        parity.ChunkedDecoder().feed(b"zz\r\nabc\r\n")


def test_content_of_chunk() -> None:
    role = json.dumps({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    assert parity.content_of_chunk(role) == (None, None)
    text = json.dumps({"choices": [{"delta": {"content": "x"}}]})
    assert parity.content_of_chunk(text) == ("x", None)
    usage = json.dumps({"choices": [], "usage": {"completion_tokens": 32}})
    assert parity.content_of_chunk(usage) == (None, 32)


def _round(path: str, r: int, samples: list, wall: float, serving: float, engine: float,
           client: float = 0.1) -> parity.RoundResult:
    from vllm_nnrp_adapter.observability.proc_cpu import TreeCpu

    return parity.RoundResult(path, r, samples, wall, TreeCpu(serving, engine), client, 0.01,
                              "1.00 1.00 1.00")


def test_request_sample_and_summary() -> None:
    ms = 1_000_000
    s = parity.RequestSample(0, [10 * ms, 12 * ms, 15 * ms], 20 * ms, tokens=4)
    assert s.ttft_ms == 10.0 and s.total_ms == 20.0 and s.tokens_per_s == pytest.approx(200.0)
    broken = parity.RequestSample(0, error="HTTP 500")
    summary = parity.summarise([_round("http", 0, [s, broken], 0.5, 0.2, 0.4)])
    assert summary["ttft_ms"] == [10.0]
    assert summary["itl_ms"] == [2.0, 3.0]
    assert summary["aggregate_tokens_per_s"] == [8.0]
    # 4 tokens: 0.2 s of serving CPU is 50 s per 1,000 tokens; the broken request adds none
    assert summary["serving_cpu_s_per_1k_tokens"] == [pytest.approx(50.0)]
    assert summary["engine_cpu_s_per_1k_tokens"] == [pytest.approx(100.0)]
    assert summary["errors"] == 1


def test_rounds_alternate_which_path_goes_first() -> None:
    assert parity.round_order(0)[:2] == (parity.HTTP, parity.NNRP)
    assert parity.round_order(1) == tuple(reversed(parity.round_order(0)))
    assert parity.round_order(2) == parity.round_order(0)
    assert parity.round_order(1, (parity.HTTP, parity.NNRP)) == (parity.NNRP, parity.HTTP)


def test_parity_document_reports_ratios_cpu_and_targets() -> None:
    ms = 1_000_000

    def req(ttft: int, gap: int) -> parity.RequestSample:
        return parity.RequestSample(0, [ttft * ms + i * gap * ms for i in range(4)],
                                    (ttft + 4 * gap) * ms, tokens=4)

    measured = {}
    for w in (("short", 1), ("short", 8)):
        rounds = []
        for r in range(2):
            for path in parity.round_order(r):
                if path == parity.HTTP:
                    rounds.append(_round(path, r, [req(10, 2)] * 4, 0.1, 0.02, 0.05))
                elif path == NNRP_SUITE:  # the recording client's column: 4x the serving CPU
                    rounds.append(_round(path, r, [req(10, 2)] * 4, 0.1, 0.08, 0.05))
                else:  # half the throughput, twice the TTFT, twice the serving CPU
                    rounds.append(_round(path, r, [req(20, 2)] * 4, 0.2, 0.04, 0.05))
        measured[w] = rounds
    params: dict = {"interleaved": True}
    doc = parity.build_document(measured, plan=parity.Plan(2, {1: 4, 8: 4}),
                                vllm_version="0.22.1", parameters=params, notes=[])
    assert validation.validate("benchmark-results", doc) == []
    ratios = {r["name"]: r["value"] for r in doc["ratios"]}
    assert ratios["nnrp/http.short.c8.aggregate_tokens_per_s"] == pytest.approx(0.5)
    assert ratios["nnrp/http.short.c8.ttft_p50"] == pytest.approx(2.0)
    assert ratios["nnrp/http.short.c8.serving_cpu_s_per_1k_tokens"] == pytest.approx(2.0)
    assert ratios["nnrp/http.short.c8.engine_cpu_s_per_1k_tokens"] == pytest.approx(1.0)
    spread = next(m for m in doc["metrics"]
                  if m["name"] == "nnrp/http.short.c8.aggregate_tokens_per_s_by_round")
    assert spread["values"] == [pytest.approx(0.5)] * 2
    p = doc["parameters"]
    assert p["interleaved"] is True
    assert p["target.short.c8.tokens_per_s_ratio_ge_0.97"] is False
    assert p["target.short.c8.serving_cpu_per_1k_le_http"] is False
    assert p["target.short.c8.itl_p95_le_1.05x"] is True
    assert p["target.short.c1.serving_cpu_per_1k_le_http"] is False  # at every concurrency
    # every NNRP column has its ratios to HTTP; the targets read the ``nnrp`` column alone
    assert ratios["nnrp_suite/http.short.c8.serving_cpu_s_per_1k_tokens"] == pytest.approx(4.0)
    assert ratios["nnrp_suite/http.short.c8.aggregate_tokens_per_s"] == pytest.approx(1.0)
    assert ratios["nnrp_1session/http.short.c8.aggregate_tokens_per_s"] == pytest.approx(0.5)
    cpu_spread = next(m for m in doc["metrics"] if m["name"]
                      == "nnrp_suite/http.short.c8.serving_cpu_s_per_1k_tokens_by_round")
    assert cpu_spread["values"] == [pytest.approx(4.0)] * 2


def test_process_tree_cpu_counts_a_busy_child_as_engine() -> None:
    """Real processes: a child that spins shows up in the engine share, not the root's."""
    import os
    import subprocess
    import sys
    import time

    from vllm_nnrp_adapter.observability.proc_cpu import cpu_seconds, descendants, tree_cpu

    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt=time.process_time()\n"
                              "while time.process_time()-t<0.6: pass\ntime.sleep(30)"])
    try:
        before = tree_cpu(os.getpid())
        assert child.pid in descendants(os.getpid())
        deadline = time.monotonic() + 20  # bounded, and a loaded machine may be slow
        while (cpu_seconds(child.pid) or 0.0) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        spent = tree_cpu(os.getpid()).since(before)
        assert spent.engine >= 0.3
        assert spent.serving < 0.3
        assert cpu_seconds(child.pid) is not None
    finally:
        child.kill()
        child.wait()
    assert cpu_seconds(child.pid) is None


# --- cancellation and the smoke -----------------------------------------------------------------


def _delta(text: str) -> dict:
    return {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": text}


def test_cancel_summary_counts() -> None:
    ok = bench.StreamSample(0, [1, 2], outcome=contract.TERMINAL_CANCELLED,
                            terminal_ns=9_000_000, cancel_sent_ns=1_000_000, after_cancel=2)
    lost = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS, terminal_ns=5,
                              after_terminal=1)
    late = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS, terminal_ns=5,
                              cancel_sent_ns=2)
    out = bench.cancel_summary([ok, lost, late])
    assert out["latencies_ms"] == [8.0]
    assert (out["cancelled"], out["not_cancelled"], out["never_sent"]) == (1, 2, 1)
    # sent, and the answer still ran to its end: the failure the benchmark flags
    assert out["not_effective"] == 1
    # no partial reached the client after the cancel: it was sent after the answer's last one
    assert out["not_effective_after_last_partial"] == 1
    assert out["events_after_cancel"] == [2, 0, 0]
    assert out["events_after_terminal"] == 1
    assert out["lost_race"] == 0


def test_a_cancel_sent_after_the_adapter_finished_is_a_lost_race_not_a_failure() -> None:
    # the adapter stamps its success terminal with when vLLM's stream ended (timing hint)
    finished_first = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS,
                                        terminal_ns=9, cancel_sent_ns=5, completed_backend_ns=4)
    ignored = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS, terminal_ns=9,
                                 cancel_sent_ns=5, completed_backend_ns=6)
    unstamped = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS, terminal_ns=9,
                                   cancel_sent_ns=5)
    out = bench.cancel_summary([finished_first, ignored, unstamped])
    assert out["lost_race"] == 1
    # ended after the cancel left, or no stamp to prove otherwise: the cancel did not take effect
    assert out["not_effective"] == 2


def _streamed(events: list[dict], outcome: str) -> bench.StreamSample:
    return bench.StreamSample(0, [1_000_000, 2_000_000], events=events, outcome=outcome,
                              terminal_ns=3_000_000)


def test_smoke_document_is_what_the_gate_accepts() -> None:
    cases = {c.id: c for c in bench.smoke_cases("tiny-model")}
    events = [_delta("a"), _delta("b"),
              {"type": contract.EV_USAGE,
               "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}},
              {"type": contract.EV_COMPLETED, "body": {"choices": []}}]
    case = cases["smoke.stream_text"]
    sample = _streamed(events, contract.TERMINAL_SUCCESS)
    problems = bench.judge_smoke_case(case, sample)
    assert problems == []
    result = bench.smoke_result(case, sample, problems, "0.22.1")
    doc = bench.smoke_document([result])
    assert validation.validate("case-results", doc) == []
    r = doc["results"][0]
    assert r["outcome"] == contract.OUTCOME_PASSED and r["diagnostics"]["vllm"] == "0.22.1"
    assert sequence_problems(r["events"], r["terminal"]) == []


def test_smoke_judge_catches_a_wrong_sequence() -> None:
    case = next(c for c in bench.smoke_cases(None) if c.id == "smoke.stream_text")
    after = [_delta("a"), {"type": contract.EV_COMPLETED, "body": {}}, _delta("late")]
    problems = bench.judge_smoke_case(case, _streamed(after, contract.TERMINAL_SUCCESS))
    assert any("after the terminal" in p for p in problems)
    result = bench.smoke_result(case, _streamed(after, contract.TERMINAL_SUCCESS), problems, "0.22.1")
    assert result["outcome"] == contract.OUTCOME_FAILED and result["message"]


def test_smoke_judge_of_tool_call_non_streaming_and_cancel() -> None:
    cases = {c.id: c for c in bench.smoke_cases(None)}
    base = {"index": 0, "item_id": "i1", "call_id": "c1"}
    tool = [{"type": contract.EV_TOOL_CALL_STARTED, **base, "name": "lookup"},
            {"type": contract.EV_TOOL_CALL_DELTA, **base, "arguments_delta": '{"q": "alpha"}'},
            {"type": contract.EV_TOOL_CALL_COMPLETED, **base, "name": "lookup",
             "arguments": '{"q": "alpha"}'},
            {"type": contract.EV_COMPLETED, "body": {}}]
    violations = [v for ev in tool for v in validation.validate_event(ev)]
    assert violations == []
    sample = _streamed(tool, contract.TERMINAL_SUCCESS)
    assert bench.judge_smoke_case(cases["smoke.forced_tool_call"], sample) == []
    bad = [dict(tool[0]), dict(tool[1]), {**tool[2], "arguments": '{"q": "al'}, tool[3]]
    bad[1]["arguments_delta"] = '{"q": "al'
    problems = bench.judge_smoke_case(cases["smoke.forced_tool_call"],
                                      _streamed(bad, contract.TERMINAL_SUCCESS))
    assert any("not JSON" in p for p in problems)

    unary = [{"type": contract.EV_COMPLETED,
              "body": {"choices": [{"index": 0, "message": {"role": "assistant",
                                                            "content": "hi"}}]}}]
    assert bench.judge_smoke_case(cases["smoke.non_streaming"],
                                  _streamed(unary, contract.TERMINAL_SUCCESS)) == []
    empty = [{"type": contract.EV_COMPLETED, "body": {"choices": []}}]
    assert bench.judge_smoke_case(cases["smoke.non_streaming"],
                                  _streamed(empty, contract.TERMINAL_SUCCESS))

    cancelled = [_delta("a"), {"type": contract.EV_CANCELLED, "reason": "client"}]
    assert bench.judge_smoke_case(cases["smoke.cancel"],
                                  _streamed(cancelled, contract.TERMINAL_CANCELLED)) == []
    late = bench.StreamSample(0, [1], events=cancelled, outcome=contract.TERMINAL_CANCELLED,
                              after_terminal=2)
    assert any("after the terminal" in p
               for p in bench.judge_smoke_case(cases["smoke.cancel"], late))
    assert bench.judge_smoke_case(cases["smoke.cancel"],
                                  _streamed(cancelled[:1], contract.TERMINAL_SUCCESS))


def test_only_gate_eligible_cases_are_gated() -> None:
    gated = {c.id for c in bench.smoke_cases(None) if c.gated}
    assert gated == {"smoke.stream_text", "smoke.stream_text_stop"}
    for case in bench.smoke_cases("m"):
        assert case.envelope["schema_version"] == contract.SCHEMA_VERSION
        assert case.envelope["body"]["model"] == "m"
        assert "nnrp" not in case.envelope["body"]


def test_keep_alive_http_client_reads_two_streams_with_a_late_crlf() -> None:
    """A loopback server that splits the closing CRLF from the last chunk, twice."""
    import asyncio

    chunk = json.dumps({"choices": [{"delta": {"content": "x"}}]})
    usage = json.dumps({"choices": [], "usage": {"completion_tokens": 2}})
    body = _sse(chunk, chunk, usage, "[DONE]")
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    wire = _chunked(body, [len(body)])

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            request = await reader.readuntil(b"\r\n\r\n")
            length = int(request.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(head + wire[:-2])
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(wire[-2:])
            await writer.drain()
        writer.close()

    async def run() -> list[parity.RequestSample]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = parity.HttpConnection("127.0.0.1", port)
        try:
            return [await conn.stream_chat({"messages": []}, timeout=10) for _ in range(2)]
        finally:
            await conn.close()
            server.close()
            await server.wait_closed()

    for sample in asyncio.run(run()):
        assert sample.error is None
        assert sample.text == "xx" and sample.tokens == 2 and sample.finished_ns is not None


def test_documents_are_schema_valid_and_carry_the_gate_metrics() -> None:
    cancelled = bench.StreamSample(0, [1], outcome=contract.TERMINAL_CANCELLED,
                                   terminal_ns=3_000_000, cancel_sent_ns=1_000_000)
    plan = bench.Plan(repeats=1, stream_requests=2, cancel_requests=1)
    for lag in (None, [], [0.2, 0.3]):
        stream_doc, cancel_doc = bench.documents(
            [5.0, 6.0], [1.0, 2.0], [{"ttft_p50": 5.5, "inter_p50": 1.5}], 0, [cancelled],
            [2.0], plan, "0.22.1", {"load_average_start": "1.00 1.00 1.00"}, lag)
        names = {m["name"] for m in stream_doc["metrics"]}
        assert {bench.TTFT_METRIC, bench.INTER_EVENT_METRIC} <= names
        assert (bench.BACKEND_METRIC in names) == bool(lag)
        assert validation.validate("benchmark-results", stream_doc) == []
        assert validation.validate("benchmark-results", cancel_doc) == []
        cancel = next(m for m in cancel_doc["metrics"] if m["name"] == bench.CANCEL_METRIC)
        assert cancel["values"] == [2.0] and cancel_doc["versions"]["vllm"] == "0.22.1"
        assert cancel_doc["parameters"]["cancel_not_effective"] == 0
        assert cancel_doc["parameters"]["cancel_verdict"] == "pass"
    ignored = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS,
                                 terminal_ns=9_000_000, cancel_sent_ns=1_000_000, after_cancel=300)
    _, cancel_doc = bench.documents(
        [5.0], [1.0], [{"ttft_p50": 5.0, "inter_p50": 1.0}], 0, [cancelled, ignored],
        [2.0], plan, "0.22.1", {})
    assert cancel_doc["parameters"]["cancel_not_effective"] == 1
    assert cancel_doc["parameters"]["cancel_verdict"] == "fail"
    assert any("did not take effect: 1 of 2" in n for n in cancel_doc["notes"])


def test_cancels_under_load_are_reported_apart_and_judged_with_the_rest() -> None:
    """The c=8 cancels get their own latency and events-after-cancel metrics, and one that did
    not take effect fails the document's verdict as a c=1 one does."""
    def cancelled(latency_ms: float, after: int = 0) -> bench.StreamSample:
        return bench.StreamSample(0, [1], outcome=contract.TERMINAL_CANCELLED,
                                  terminal_ns=int((1 + latency_ms) * 1e6),
                                  cancel_sent_ns=1_000_000, after_cancel=after)

    plan = bench.Plan(repeats=1, stream_requests=1, cancel_requests=2, cancel_concurrency=8)
    ignored = bench.StreamSample(0, [1], outcome=contract.TERMINAL_SUCCESS,
                                 terminal_ns=9_000_000, cancel_sent_ns=1_000_000, after_cancel=7)
    for loaded, verdict in (([cancelled(4.0, 1), cancelled(6.0, 2)], "pass"),
                            ([cancelled(4.0, 1), ignored], "fail")):
        _, doc = bench.documents(
            [5.0], [1.0], [{"ttft_p50": 5.0, "inter_p50": 1.0}], 0, [cancelled(2.0)], [2.0],
            plan, "0.22.1", {}, None, loaded, [5.0])
        assert validation.validate("benchmark-results", doc) == []
        metrics = {m["name"]: m for m in doc["metrics"]}
        assert metrics[bench.CANCEL_METRIC]["values"] == [2.0]  # c=1 only: the gate's figure
        busy = metrics[f"{bench.CANCEL_METRIC}.c8"]["values"]
        assert busy == ([4.0, 6.0] if verdict == "pass" else [4.0])
        assert metrics["cancel.events_after_cancel.c8"]["max"] == (2 if verdict == "pass" else 7)
        assert doc["parameters"]["cancel_verdict"] == verdict
        assert doc["parameters"]["cancel_not_effective_under_load"] == (verdict == "fail")
        assert doc["parameters"]["cancel_concurrency_under_load"] == 8
        # the p99 of events after the cancel is the target (<= 2): 7 misses it
        target = doc["parameters"]["target.cancel_c8.events_after_cancel_p99_le_2"]
        assert target is (verdict == "pass")


def test_http_client_reconnects_when_the_server_closed_an_idle_connection() -> None:
    import asyncio

    body = _sse(json.dumps({"choices": [{"delta": {"content": "y"}}]}), "[DONE]")
    answer = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
              + _chunked(body, [len(body)]))
    seen: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(1)
        if len(seen) == 2:  # the second connection's first request is answered
            request = await reader.readuntil(b"\r\n\r\n")
            length = int(request.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(answer)
            await writer.drain()
            return
        if len(seen) == 1:  # the first connection answers once, then closes as idle
            request = await reader.readuntil(b"\r\n\r\n")
            length = int(request.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(answer)
            await writer.drain()
            writer.close()

    async def run() -> list[parity.RequestSample]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = parity.HttpConnection("127.0.0.1", port)
        try:
            first = await conn.stream_chat({"messages": []}, timeout=10)
            await asyncio.sleep(0.1)
            return [first, await conn.stream_chat({"messages": []}, timeout=10)]
        finally:
            await conn.close()
            server.close()
            await server.wait_closed()

    samples = asyncio.run(run())
    assert [s.error for s in samples] == [None, None]
    assert [s.text for s in samples] == ["y", "y"] and len(seen) == 2


# --- the hot-path profile's attribution ---------------------------------------------------------


def test_hotpath_attributes_a_stack_to_its_deepest_known_frame() -> None:
    from vllm_nnrp_adapter.benchmark.hotpath import hotpath

    raw = "\n".join([
        # json.loads under the backend's SSE parser is SSE parsing, not JSON
        "MainThread;_run_op (vllm_nnrp_adapter/nnrp_server.py);handle (vllm_nnrp_adapter/"
        "adapter.py);_stream (vllm_nnrp_adapter/vllm_backend.py);loads (json/__init__.py) 6",
        # the event's encoding under the operation task
        "MainThread;_run_op (vllm_nnrp_adapter/nnrp_server.py);encode_event "
        "(nnrp_conformance/wire/codec.py);dumps (json/__init__.py) 3",
        "nnrp-session-1;_run (vllm_nnrp_adapter/nnrp_server.py);poll_events (nnrp/server.py) 1",
        "MainThread;mystery (somewhere.py) 2",
    ])
    stacks = hotpath.parse_raw(raw)
    assert sum(stacks.values()) == 12
    got = hotpath.shares(stacks)
    assert got["SSE parse + json.loads (backend)"] == pytest.approx(0.5)
    assert got["JSON encode (event → wire bytes)"] == pytest.approx(0.25)
    assert got["poll (native, pump thread)"] == pytest.approx(1 / 12)
    assert got[hotpath.OTHER] == pytest.approx(2 / 12)
    with pytest.raises(ValueError):
        hotpath.parse_raw("no count here")


def test_hotpath_shares_each_threads_exact_cpu_among_its_busy_samples() -> None:
    from vllm_nnrp_adapter.benchmark.hotpath import hotpath

    raw = "\n".join([
        "thread (101): MainThread;_run_once (asyncio/base_events.py);"
        "EpollSelector.select (selectors.py) 50",  # waiting in epoll: dropped
        "thread (101): MainThread;_run_op (vllm_nnrp_adapter/nnrp_server.py);"
        "encode_event (nnrp_conformance/wire/codec.py) 30",
        "thread (101): MainThread;_SessionPump.enqueue (vllm_nnrp_adapter/nnrp_server.py) 10",
        "thread (202): nnrp-session-1;_SessionPump._run (vllm_nnrp_adapter/nnrp_server.py);"
        "_send_partial (vllm_nnrp_adapter/nnrp_server.py) 5",
    ])
    threads = hotpath.by_thread(hotpath.parse_raw(raw))
    assert threads[101][0] == "MainThread" and sum(threads[101][1].values()) == 40
    # 1 s of main-thread CPU, 0.5 s of pump, 0.25 s of a thread py-spy never saw; 1,000 tokens
    cats, names = hotpath.attribute({101: 1.0, 202: 0.5, 303: 0.25}, threads, 1000)
    assert cats["JSON encode (event → wire bytes)"] == pytest.approx(750.0)
    assert cats["thread hand-offs (enqueue, wake, call_soon_threadsafe)"] == pytest.approx(250.0)
    assert cats["native sends"] == pytest.approx(500.0)
    assert cats[hotpath.NATIVE] == pytest.approx(250.0)
    assert names["MainThread"] == pytest.approx(1000.0)


def test_http_client_turns_a_stalled_response_into_one_failed_sample() -> None:
    import asyncio

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(5)  # never answers within the client's timeout
        writer.close()

    async def run() -> parity.RequestSample:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = parity.HttpConnection("127.0.0.1", port)
        try:
            return await conn.stream_chat({"messages": []}, timeout=0.3)
        finally:
            await conn.close()
            server.close()

    sample = asyncio.run(run())
    assert sample.error is not None and "timed out after 0.3 s" in sample.error


def test_parity_logs_never_overwrite_the_suite_runs_adapter_log(tmp_path) -> None:
    """A release writes the suite run and the parity run into one ``vllm-<version>/``: each
    adapter log must stay beside the run it belongs to, and the gate must link both."""
    from nnrp_conformance.gate.evidence import VERSION_FILES
    from vllm_nnrp_adapter.release import suite_adapter_log

    vdir = tmp_path / "vllm-0.22.1"
    suite_log = suite_adapter_log(vdir)
    parity_adapter, parity_http = parity.log_paths(vdir)
    assert len({suite_log, parity_adapter, parity_http}) == 3
    for path in (suite_log, parity_adapter, parity_http):
        assert path.is_relative_to(vdir)
        assert path.relative_to(vdir).as_posix() in VERSION_FILES


def test_adapter_ab_pairs_rounds_and_alternates_who_goes_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``bench adapter-ab``: the baseline and this adapter alternate which goes first, each
    figure's ratio is taken round by round (this/baseline), and a folder that is not a
    checkout of this project is refused with its missing parts named."""
    from vllm_nnrp_adapter.benchmark.parity import adapter_ab as ab

    assert ab.order(0) == (ab.BASE, ab.HEAD) and ab.order(1) == (ab.HEAD, ab.BASE)
    ms = 1_000_000
    sample = parity.RequestSample(0, [10 * ms, 12 * ms], 20 * ms, tokens=4)
    slow = parity.RequestSample(0, [20 * ms, 22 * ms], 30 * ms, tokens=4)
    # this adapter: twice the tokens/s in round 0, the same in round 1
    measured = {("short", 8): [
        _round(ab.BASE, 0, [sample], 1.0, 0.2, 0.4), _round(ab.HEAD, 0, [sample], 0.5, 0.2, 0.4),
        _round(ab.HEAD, 1, [slow], 1.0, 0.2, 0.4), _round(ab.BASE, 1, [sample], 1.0, 0.2, 0.4)]}
    rows = {r["figure"]: r for r in ab.compare(measured)}
    tps = rows["aggregate tokens/s"]
    assert (tps["ratio_min"], tps["ratio_max"], tps["rounds"]) == (1.0, 2.0, 2)
    assert tps["ratio_median"] == pytest.approx(1.5)
    assert rows["TTFT p50 ms"]["ratio_max"] == pytest.approx(2.0)  # round 1: 20 ms vs 10 ms
    assert "short c8" in ab.table(list(rows.values()))
    with pytest.raises(ValueError, match="not a checkout of this project"):
        ab.baseline_env(tmp_path)
    (tmp_path / "reference_adapter").mkdir()
    (tmp_path / "suite").mkdir()
    assert ab.baseline_env(tmp_path)["PYTHONPATH"].split(":") == [
        str(tmp_path / "reference_adapter"), str(tmp_path / "suite")]


def test_parity_refuses_unknown_paths_by_name(capsys) -> None:  # type: ignore[no-untyped-def]
    """``--paths`` names the columns to measure; a name it does not know is refused, with the
    known ones listed, before anything starts."""
    with pytest.raises(SystemExit) as exc:
        parity.main(["--paths", "http,nnrp,nnrp_bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown nnrp_bogus" in err and "nnrp_suite_1session" in err
