"""Subcommands of ``nnrp-conformance``: one module each (see :mod:`nnrp_conformance.cli`)."""
