"""What every benchmark family shares, and nothing family-specific.

* :mod:`.results`: the ``benchmark-results`` document: its names (the release policy's),
  machine and version capture, statistics (medians, percentiles, ratios), the printed table,
  writing it validated against the suite's schema.
* :mod:`.streams`: the real-vLLM request (prompt, tools, envelope) and one streamed answer as
  the client saw it (:class:`.streams.StreamSample`), the engine's state, the load average.

The ``/proc`` readings (CPU, memory, threads of a process tree) sit below the benchmarks, in
the adapter's :mod:`vllm_nnrp_adapter.observability.proc_cpu`: its own tooling reads them too.
"""
