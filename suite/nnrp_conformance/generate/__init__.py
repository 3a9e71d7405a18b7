"""Generated requests (``--nnrp-generate N``, docs/generation.md): inputs no recipe sends.

The entry points, both called by the run core whichever face runs it:

* :func:`generated_cases` (from ``ConformanceCore.build_plan``): ``N`` requests drawn with
  hypothesis from the seed (``--nnrp-seed``, else a random one, printed), for the
  operations the manifest and the capability document claim, each written as a recipe
  (``recipe_files.py``) and planned by the planner like any recipe. The cases join the
  plan, so each one is run by ``ConformanceCore.run_case`` -> ``runner.run_case`` (or
  ``concurrency.run_group`` for operations in flight together) and judged by
  ``checks.judge``, exactly as a recipe's request: whatever hooks the runner's submit sees
  them too.
* :func:`settle` (from ``recording.case_record``): after an invalid request, the session's
  next operation must get a terminal (``generated.session-serves-next``); a failed or
  non-strict generated case is shrunk (``shrink.py``) and saved as a recipe file
  (``--nnrp-generate-save DIR``, default ``generated-recipes/`` beside the case results),
  which the reproduce command runs alone.
"""


from __future__ import annotations

from typing import Any

__all__ = ["generated_cases", "settle"]


def generated_cases(core: Any) -> list[Any]:
    """The run's generated cases, planned (``run.generated_cases``)."""
    # lazy on purpose: hypothesis loads only for a generating run (the plugin, and with it
    # this package, loads in every pytest run of the venv)
    from nnrp_conformance.generate.run import generated_cases as cases

    return cases(core)


def settle(core: Any, case: Any, result: Any) -> tuple[Any, Any]:
    """After a generated case ran (``run.settle``)."""
    # lazy on purpose: hypothesis (see generated_cases)
    from nnrp_conformance.generate.run import settle as settled

    return settled(core, case, result)
