"""The vLLM environments of a release run: built in the background (``scripts/vllm-venv
--announce``), each version's readiness as it comes, and what the builds cost (seconds, bytes,
the cache's disk)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..launch.embedded import REPO_ROOT
from .steps import console


class BackgroundBuild:
    """``scripts/vllm-venv --announce`` for every version at once, in the background (it builds
    one environment per torch build side by side), at a lower CPU priority (``nice``) than the
    runs beside it. It says on standard output which version is ready (``ready VERSION
    PATH``), so each version's run starts as soon as its own environment is, whichever that is
    (measured cold: the first is ready after about 2.5 minutes, all four after 4 to 5). Its
    phase lines are relayed to the console as they come (no second live display beside the
    steps')."""

    #: the builder's niceness: the first versions' runs beside it get the CPU first
    NICENESS = 10

    def __init__(self, builder: Path, versions: Sequence[str]) -> None:
        self.started = time.monotonic()
        self.ended: float | None = None
        self._ready: list[str] = []
        self._changed = threading.Condition()
        # coreutils' nice execs the builder (same PID); no preexec_fn beside our threads
        self.proc = subprocess.Popen(["nice", "-n", str(self.NICENESS), sys.executable,
                                      str(builder), "--announce", *versions],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._threads = [threading.Thread(target=fn, daemon=True)
                         for fn in (self._relay, self._announcements)]
        for thread in self._threads:
            thread.start()

    def _relay(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            console.print(line.rstrip("\n"), markup=False, highlight=False)

    def _announcements(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            words = line.split()
            if len(words) == 3 and words[0] == "ready":
                with self._changed:
                    self._ready.append(words[1])
                    self._changed.notify_all()
        self.proc.wait()
        with self._changed:
            self.ended = time.monotonic()
            self._changed.notify_all()

    @property
    def running(self) -> bool:
        return self.ended is None

    def _pick(self, pending: Sequence[str]) -> str | None:
        """The first of ``pending`` announced ready; once the builder has ended, the first of
        ``pending`` (its environment step then says why it has none); else None. The caller
        holds the lock."""
        ready = [v for v in self._ready if v in pending]
        if ready:
            return ready[0]
        return pending[0] if pending and self.ended is not None else None

    def next_ready(self, pending: Sequence[str]) -> str:
        """:meth:`ready_now`, waiting until it names a version."""
        with self._changed:
            version = self._changed.wait_for(lambda: self._pick(pending))
            assert version is not None  # without a timeout, wait_for returns a version
            return version

    def ready_now(self, pending: Sequence[str]) -> str | None:
        """The first of ``pending`` whose environment is ready now, without waiting (once the
        builder has ended, the first of ``pending``); None when none is yet."""
        with self._changed:
            return self._pick(pending)

    def wait(self) -> int:
        """The builder's exit status, once every environment is built."""
        for thread in self._threads:
            thread.join()
        return self.proc.returncode

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started


def environment_facts(versions: Sequence[str]) -> dict[str, Any]:
    """Per version what its base venv's stamp records (build seconds, bytes, bytes shared by
    hard links, torch), and the cache's disk with each file counted once."""
    out: dict[str, Any] = {}
    caches: set[Path] = set()
    for v in versions:
        try:
            checkout = json.loads((REPO_ROOT / ".vllm-venvs" / v / "nnrp-checkout-stamp.json")
                                  .read_text(encoding="utf-8"))
            base = Path(checkout["base"])
            stamp = json.loads((base / "nnrp-vllm-stamp.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError):
            continue
        caches.add(base.parent)
        out[v] = {k: stamp.get(k) for k in ("install_seconds", "venv_bytes", "shared_bytes",
                                            "torch_installed", "built_at")}
    seen: set[tuple[int, int]] = set()
    total = 0
    for cache in caches:
        for root, _dirs, files in os.walk(cache):
            for name in files:
                st = os.lstat(os.path.join(root, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    out["cache_bytes"] = total
    return out
