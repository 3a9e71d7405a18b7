"""The statement-coverage page (``docs/coverage.md``, issue 43 item 5): every normative
statement of the profile's three texts, with the rules and recipes that test it or the
stated reason it is not tested.

Repository tooling: it reads the texts' verbatim copies in ``upstream/`` beside this
package's checkout, the rulebook, the bundled recipes and ``coverage/reasons.json``.
``texts`` reads the texts and compares quotes (shared with tests/unit/test_rule_sources.py),
``statements`` splits them into statements, ``mapping`` decides what tests each and finds the
problems, ``page`` renders the page; ``python -m nnrp_conformance.coverage --out
docs/coverage.md`` regenerates it.
"""

from __future__ import annotations

from nnrp_conformance import recipes, rules
from nnrp_conformance.coverage.mapping import Coverage, compute, load_reasons
from nnrp_conformance.coverage.statements import all_statements

__all__ = ["Coverage", "build"]


def build() -> Coverage:
    """The coverage of the repository as it is: its texts, rulebook, recipes and reasons."""
    return compute(all_statements(), rules.rulebook(), recipes.load_recipes(), load_reasons())
