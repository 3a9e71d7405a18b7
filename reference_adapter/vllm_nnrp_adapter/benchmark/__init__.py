"""Benchmarks of the adapter, one module per benchmark, each with ``main(argv) -> int``.

``wire``: the NNRP wire itself (naive nnrp-py pattern vs this project's binding),
cross-process over loopback TCP. Hooked up as ``vllm-nnrp bench wire``.
"""
