"""Owns the profile as the adapter speaks it: envelope, bodies, events, capability document, policy.
May import: no room (the suite's ``nnrp_conformance`` and the standard library only).

``profile`` (constants, envelope checks, event builders, the capability document), ``bodies``
(each operation's body checks), ``mapping`` and ``responses_mapping`` (vLLM's output to events,
the design's mapping tables), ``policy`` (the release policy: the vLLM lines supported, the
versions tested). Empty on purpose: vLLM imports ``policy`` in every process it starts (the
plugin entry point), so importing this room imports nothing else.
"""
