"""The wire family: the NNRP wire and the adapter's server binding alone, no engine.

Commands: ``bench wire`` (:mod:`.wire`, the naive nnrp-py pattern vs the SDK floor vs this
binding, cross-process), ``bench cancel`` (:mod:`.cancel`, cancel latency with N streams on
one session) and ``bench idle`` (:mod:`.idle`, the binding's CPU with idle sessions).
Pieces: :mod:`.servers` (the three servers and the bench handler that stamps each delta) and
:mod:`.clients` (the three clients).
"""
