"""Owns the profile-level request handler: checks, dispatch, backend calls, events, the stall bound.
May import: `profile`, `observability`, `vllm_backend`.

``adapter`` (:class:`VllmNnrpAdapter`, the chat path and the operations offered), ``handlers``
(``responses.create``, ``models.list``, ``embeddings.create``), ``backend_call`` (one streaming
backend request: its abort hook, failure and stall events), ``stall`` (the stall watchdog).
"""
