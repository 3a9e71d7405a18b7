"""The per-thread profile family: where the serving process's CPU goes per generated token.

Command: ``bench hotpath`` (:mod:`.hotpath`, a py-spy profile under streaming load, on the
adapter and on vLLM's HTTP server). Pieces: :mod:`.categories` (which category of work a
sampled stack belongs to) and :mod:`.threads` (each thread's CPU, switches and run-queue
wait from ``/proc/PID/task``, by pool). It drives the load through the parity family's paths.
"""
