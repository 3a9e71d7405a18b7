"""One binding per vLLM version family (as upstream's adapter does): ``v0_18`` (0.18-0.22),
``v0_23`` (0.23-0.28), ``v0_29`` (0.29-0.32), each a :class:`.base.Family` naming where its
releases keep the objects the adapter uses and what they break; :mod:`.select` picks one from
the detected version. The only place in the adapter that compares vLLM versions."""

from .base import Family
from .select import FAMILIES, check_version_supported, family_for, limitations, nearest_tested

__all__ = ["FAMILIES", "Family", "check_version_supported", "family_for", "limitations",
           "nearest_tested"]
