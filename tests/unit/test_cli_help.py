"""`vllm-nnrp --help` names the benchmarks that exist (issue 43 item 6: it named `latency` and
`smoke`, which are no commands, and left out five that are).

The truth comes from the tree: every benchmark module with a ``main`` (a command's entry, as
``benchmark/__init__.py`` lays them out) is registered in ``BENCHMARKS``, every registered
module is such a file, and the top-level help lists exactly the registered names, as does
``vllm-nnrp bench --help``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_nnrp_adapter import benchmark, cli

BENCH_DIR = Path(benchmark.__file__).parent


def _modules_with_main() -> set[str]:
    """Dotted names, relative to the benchmark package, of its modules defining ``main``."""
    found = set()
    for path in BENCH_DIR.rglob("*.py"):
        if path.name != "__init__.py" and re.search(r"^def main\(", path.read_text(encoding="utf-8"),
                                                    re.M):
            found.add(".".join(path.relative_to(BENCH_DIR).with_suffix("").parts))
    return found


def test_every_benchmark_module_is_a_registered_command() -> None:
    assert {module for module, _ in benchmark.BENCHMARKS.values()} == _modules_with_main()


def _listed(text: str, heading: str) -> list[str]:
    return [line.split()[0] for line in text.split(heading, 1)[1].splitlines() if line.strip()]


def test_the_top_level_help_names_the_registered_benchmarks(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.split()[:1] == ["bench"])
    named = re.fullmatch(r"\s*bench\s+benchmarks \((.*)\)", line)
    assert named is not None, line
    assert named.group(1).split(", ") == list(benchmark.BENCHMARKS)


def test_bench_help_lists_the_registered_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--help"]) == 0
    assert _listed(capsys.readouterr().out, "benchmarks:") == list(benchmark.BENCHMARKS)
