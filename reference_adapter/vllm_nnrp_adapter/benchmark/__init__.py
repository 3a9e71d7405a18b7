"""Benchmarks of the adapter, a folder per family, each command a module with ``main(argv) -> int``.
May import: `profile`, `observability`, `vllm_backend`, `nnrp_server`, `adapter`, `launch`.

``vllm-nnrp bench NAME [ARGS]`` dispatches here (:data:`BENCHMARKS` names the module of each
command). Every benchmark prints a table and writes its JSON (``--json PATH``) in the
``benchmark-results`` schema; figures are medians of repeats, with machine and versions
recorded. Laid out as vLLM lays out ``vllm/benchmarks/``: what every family shares in
``lib/``, a family of several modules in its own folder, a one-module command at the top.

* ``wire/``: the NNRP wire and the server binding alone, no engine. ``wire`` (naive nnrp-py
  pattern vs the SDK floor vs this project's binding, cross-process over loopback TCP),
  ``cancel`` (cancel latency with N fast streams sharing one session), ``idle`` (the server
  binding's CPU while 1, 32 and 256 sessions sit idle).
* ``mapper.py``: profile mapper throughput (chunk → event → wire bytes) against its floor.
* ``soak/``: soak and load. ``soak`` (a long operation soak on a scripted backend, resident
  memory over time, every event checked) and ``capacity`` (the most concurrent streaming
  sessions the adapter serves without an error, real vLLM).
* ``latency/``: ``vllm``, streaming latency, cancellation latency and the end-to-end smoke
  on real vLLM.
* ``parity/``: ``parity`` (vLLM's own HTTP/SSE server against the adapter over NNRP, same
  engine, interleaved rounds, CPU per 1,000 tokens of each serving process) and
  ``adapter-ab`` (this adapter against an earlier checkout of it, same engine, interleaved).
* ``hotpath/``: ``hotpath``, a py-spy profile of the serving process under load, CPU per
  token by category and by thread.
* ``lib/``: the benchmark-results document (``results``: metrics, machine, statistics, the
  table) and the real-vLLM request and stream sample (``streams``).

Nothing in the adapter's core imports this package: only the CLI and the release run do
(``tests/unit/test_import_graph.py``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: command -> (its module under this package, what it measures)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "wire": ("wire.wire", "the NNRP wire: naive nnrp-py vs this binding"),
    "mapper": ("mapper", "profile mapper throughput vs the parse+serialise floor"),
    "cancel": ("wire.cancel", "cancel latency with 1/4/16/32 streams sharing one session"),
    "soak": ("soak.soak", "10,000-operation soak, resident memory flat after warm-up"),
    "vllm": ("latency.vllm", "streaming and cancellation latency, e2e smoke (real vLLM)"),
    "parity": (
        "parity.parity",
        "HTTP/SSE (vllm serve) vs NNRP adapter on the same engine, interleaved",
    ),
    "hotpath": ("hotpath.hotpath", "py-spy profile of the serving process: CPU per token by category"),
    "idle": ("wire.idle", "server binding CPU with 1/32/256 idle sessions"),
    "capacity": (
        "soak.capacity",
        "most concurrent streaming sessions served without an error (real vLLM)",
    ),
    "adapter-ab": (
        "parity.adapter_ab",
        "this adapter vs an earlier checkout of it, same engine, interleaved",
    ),
}


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: vllm-nnrp bench NAME [ARGS...]\n\nbenchmarks:")
        for name, (_, doc) in BENCHMARKS.items():
            print(f"  {name:<8} {doc}")
        return 0 if args else 2
    name = args[0]
    if name not in BENCHMARKS:
        print(f"vllm-nnrp bench: unknown benchmark {name!r} (try --help)", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"{__name__}.{BENCHMARKS[name][0]}")
    except ModuleNotFoundError as exc:
        print(f"vllm-nnrp bench {name}: not available here ({exc})", file=sys.stderr)
        return 2
    return int(module.main(args[1:]) or 0)
