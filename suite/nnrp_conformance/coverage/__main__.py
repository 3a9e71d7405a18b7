"""``python -m nnrp_conformance.coverage [--out FILE]``: render the statement-coverage page.

Without ``--out`` the page goes to standard output. With it the file is written only when
the mapping has no problems; otherwise each problem is printed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nnrp_conformance.coverage import build, page
from nnrp_conformance.coverage.texts import TextsMissingError
from nnrp_conformance.documents import DocumentSyntaxError
from nnrp_conformance.recipes import RecipeError
from nnrp_conformance.validation import SchemaViolationError

#: what can be wrong with the inputs, each with a message that says where
_BAD_INPUT = (TextsMissingError, DocumentSyntaxError, SchemaViolationError, RecipeError)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnrp_conformance.coverage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the page here (docs/coverage.md)")
    args = parser.parse_args(argv)
    try:
        cov = build()
    except _BAD_INPUT as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cov.problems:
        print(f"{len(cov.problems)} coverage problem(s):", file=sys.stderr)
        for problem in cov.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    text = page.render(cov)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {len(cov.statements)} statements", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
