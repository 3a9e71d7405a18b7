"""The latency and cancellation family, on real vLLM.

Command: ``bench vllm`` (:mod:`.vllm`: streaming latency, cancellation latency measured after
N events, and the end-to-end smoke). Pieces: :mod:`.plan` (what a run measures, quick and
full presets), :mod:`.cancellation` (answers cancelled at their Nth delta, the contract's
counts), :mod:`.smoke` (the smoke cases the release gate re-judges) and :mod:`.documents`
(the benchmark-results documents). Cancel latency on the wire alone, no engine, is the wire
family's ``bench cancel``.
"""
