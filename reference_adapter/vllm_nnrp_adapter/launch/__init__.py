"""Owns starting and running the adapter: both start-up paths, settings, security, processes.
May import: `profile`, `observability`, `vllm_backend`, `nnrp_server`, `adapter`.

``serve`` (``vllm-nnrp serve`` and the serving both paths share), ``vllm_plugin`` (inside
``vllm serve``), ``settings`` (their one ``ServeConfig``), ``security``, ``scaleout`` (one
address per API server), ``logs`` (where log lines go), ``probe`` (the health probe),
``embedded`` (the embedded default's engine), ``adapter_process`` (the adapter as a child
process) and ``processes`` (process groups, ports, ``/dev/shm``, a bounded stop).
"""
