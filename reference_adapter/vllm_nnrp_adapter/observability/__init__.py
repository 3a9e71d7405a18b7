"""Owns what the adapter observes of itself: one record per operation, its metrics, /proc readings.
May import: no room (the suite's ``nnrp_conformance`` and the standard library only).

``observability`` (the observation record, its aggregates, the Prometheus collector),
``proc_cpu`` (CPU time, memory and threads of a serving process tree, from ``/proc``).
"""
