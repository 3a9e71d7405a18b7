"""The NNRP wire as both ends of this project use it, built on nnrp-py.

``codec`` maps envelopes, events and terminals to and from typed payloads (profile §6.1, §7.1, §8.1);
``nodelay`` works around the missing TCP_NODELAY; ``pump`` holds the helpers the
client and the adapter's server binding share (endpoints, status triage, sockets).
"""
