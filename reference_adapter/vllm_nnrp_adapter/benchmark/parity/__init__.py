"""The parity family: the adapter over NNRP against vLLM's own HTTP/SSE path, same engine.

Commands: ``bench parity`` (:mod:`.parity`, HTTP/SSE vs the NNRP columns, interleaved
rounds) and ``bench adapter-ab`` (:mod:`.adapter_ab`, this adapter against an earlier
checkout of it). Pieces: :mod:`.facts` (paths, workloads, metric names), :mod:`.run` (one
round of every workload on every path), :mod:`.report` (medians, ratios, targets, table),
:mod:`.http_sse` (vLLM's HTTP server and its client), :mod:`.lean_client` (the lean NNRP
client). The hotpath family reuses the paths and the HTTP server.
"""
