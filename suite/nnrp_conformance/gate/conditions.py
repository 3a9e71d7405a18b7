"""The five release conditions, each judged from the recorded evidence alone.

Owns which function judges which condition (``contract.RELEASE_GATES`` order); each returns
a :class:`GateVerdict`: pass/fail, a one-line reason, the evidence paths and facts, every
failure in words that name the file and field, and gate-specific details for the reports.
The judges: ``recipe_conditions`` (a, b), ``bench_condition`` (c), ``release_conditions``
(d, e); what they share is ``verdicts``.
"""

from __future__ import annotations

from nnrp_conformance import contract
from nnrp_conformance.gate.bench_condition import benchmark_baseline
from nnrp_conformance.gate.recipe_conditions import level1_implemented, recipes_pass
from nnrp_conformance.gate.release_conditions import readme_documents, vllm_smoke
from nnrp_conformance.gate.verdicts import GateInputs, GateVerdict, gated_versions

__all__ = ["GateInputs", "GateVerdict", "gated_versions", "judge_all"]

_JUDGES = {
    contract.GATE_LEVEL1_IMPLEMENTED: level1_implemented,
    contract.GATE_RECIPES_PASS: recipes_pass,
    contract.GATE_BENCHMARK_BASELINE: benchmark_baseline,
    contract.GATE_VLLM_SMOKE: vllm_smoke,
    contract.GATE_README_DOCUMENTS: readme_documents,
}


def judge_all(inputs: GateInputs) -> list[GateVerdict]:
    """The five verdicts, in ``contract.RELEASE_GATES`` order."""
    return [_JUDGES[name](inputs) for name in contract.RELEASE_GATES]
