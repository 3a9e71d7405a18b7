"""One step of the release run: shown with a spinner (or its own progress) and its duration,
its outcome collected into ``release-run.json``'s entries, saying what ran beside it."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from ..launch.embedded import ConformanceSetupError

console = Console(stderr=True)


class Step:
    """One long step, shown with its progress and duration; failures are collected."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        self.log = log
        #: True while the environments are still being built beside the steps: a step's
        #: entry says so (its figures were measured beside a build)
        self.beside_build: Callable[[], bool] = lambda: False

    def __call__(self, title: str, fn: Callable[[], Any], *, spinner: bool = True,
                 beside: str | None = None) -> Any:
        """``spinner=False``: ``fn`` shows its own progress, or runs beside another step's
        (one live display at a time); ``beside``: what that other step is (its entry says)."""
        t0 = time.monotonic()
        beside_build = self.beside_build()
        with console.status(f"[bold]{title}…") if spinner else contextlib.nullcontext():
            try:
                result = fn()
                # a command's exit status fails the step when non-zero; other values are
                # the step's product (a path, an interpreter)
                ok = result is not False and not (
                    isinstance(result, int) and not isinstance(result, bool) and result != 0
                )
            except (ConformanceSetupError, subprocess.CalledProcessError, OSError) as exc:
                result, ok = exc, False
        took = time.monotonic() - t0
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        console.print(f"{mark} {title} [dim]({took:.0f} s"
                      f"{', beside ' + beside if beside else ''})[/dim]")
        if not ok and isinstance(result, Exception):
            console.print(f"  [red]{result}[/red]")
        self.log.append({"step": title, "ok": ok, "seconds": round(took, 1),
                         **({"beside_build": True} if beside_build else {}),
                         **({"beside": beside} if beside else {})})
        return result
