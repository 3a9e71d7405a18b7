"""``vllm-nnrp release``: the whole release run, writing the evidence tree the gate reads.

For the lower bound and the current line: the adapter on real vLLM CPU with the tiny local
model, the full conformance suite against it (as a provider runs it, in its own process,
with the claims the adapter keeps on that line: ``conformance.manifest_for_vllm``, recorded
as the version's ``manifest.json`` when they are fewer than the adapter's),
the real-vLLM benchmarks (streaming and cancellation latency, e2e smoke) and the suite again
inside ``vllm serve`` with vLLM's own HTTP API as its twin (``twin/``: :mod:`.twin`). The vLLM
environments are built in the background meanwhile, and each version's run starts as soon as
its own environment is ready (:class:`BackgroundBuild`). Once every build is done: on the
current lines the HTTP/SSE parity benchmark, then the version-independent benchmarks (wire,
mapper, soak, load) and ``nnrp-conformance gate`` over all of it. The layout is the gate's
(``nnrp_conformance.gate`` docstring). ``--quick`` runs the short benchmarks (the README's
main job); without it the full ones (``scripts/regenerate-evidence`` → ``reports/``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from nnrp_conformance.gate.evidence import ADAPTER_LOG, MANIFEST_FILE, POLICY_FILE

from . import CURRENT_TESTED, TESTED_VERSIONS
from .adapter_process import AdapterProcess
from .benchmark.lib.results import BENCH_LOAD, BENCH_SOAK
from .benchmark.parity.facts import HTTP, NNRP, NNRP_IPC, NNRP_ONE
from .conformance import manifest_for_vllm, run_suite
from .embedded import REPO_ROOT, ConformanceSetupError, tiny_model, vllm_python
from .policy import policy_path
from .settings import default_manifest_path
from .twin import TWIN_DIR, run_twin
from .vllm_backend.families import limitations

console = Console(stderr=True)

#: the long-by-count runs of the soak benchmark: (name, title, sessions, (operations, warm-up)
#: of the full run, the same of ``--quick``)
LONG_RUNS = (
    (BENCH_SOAK, "soak: resident memory flat", 4, (10_000, 1_000), (2_000, 500)),
    (BENCH_LOAD, "load: every event of every operation", 64, (64_000, 1_000), (6_400, 500)),
)


class Step:
    """One long step, shown with its progress and duration; failures are collected."""

    def __init__(self, log: list[dict[str, Any]]) -> None:
        self.log = log
        #: True while the environments are still being built beside the steps: a step's
        #: entry says so (its figures were measured beside a build)
        self.beside_build: Callable[[], bool] = lambda: False

    def __call__(self, title: str, fn: Callable[[], Any], *, spinner: bool = True) -> Any:
        """``spinner=False``: ``fn`` shows its own progress (no second live display)."""
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
        console.print(f"{mark} {title} [dim]({took:.0f} s)[/dim]")
        if not ok and isinstance(result, Exception):
            console.print(f"  [red]{result}[/red]")
        self.log.append({"step": title, "ok": ok, "seconds": round(took, 1),
                         **({"beside_build": True} if beside_build else {})})
        return result


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

    def next_ready(self, pending: Sequence[str]) -> str:
        """The first of ``pending`` whose environment is ready, waiting for one; once the
        builder has ended, the first of ``pending`` (its environment step then says why it
        has none)."""
        with self._changed:
            while True:
                ready = [v for v in self._ready if v in pending]
                if ready:
                    return ready[0]
                if self.ended is not None:
                    return pending[0]
                self._changed.wait()

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


def _bench(python: str, name: str, args: Sequence[str]) -> int:
    """A benchmark in the interpreter that has what it needs (vLLM ones: the vLLM venv)."""
    return subprocess.call([python, "-m", "vllm_nnrp_adapter.cli", "bench", name, *args])


def suite_adapter_log(vdir: Path) -> Path:
    """The log of the adapter the suite and the latency benchmarks ran against; the parity
    benchmark's own adapter logs elsewhere (``benchmark.parity.parity.log_paths``)."""
    return vdir / ADAPTER_LOG


def run_version(version: str, out: Path, *, quick: bool, step: Step) -> None:
    """One version's steps on the adapter's own engine and on ``vllm serve``'s (the twin);
    its parity run, which starts servers of its own, is :func:`run_parity`."""
    vdir = out / f"vllm-{version}"
    (vdir / "bench").mkdir(parents=True, exist_ok=True)
    python = step(f"vLLM {version} environment", lambda: vllm_python(version))
    if not isinstance(python, str):
        return
    model = step(f"tiny model for vLLM {version}", lambda: tiny_model(python))
    if not isinstance(model, Path):
        return
    # the embeddings engine where the line can offer Level 3 (docs/levels.md#reference-adapter)
    embeddings = not limitations(version)
    adapter = AdapterProcess(python, model, log_path=suite_adapter_log(vdir),
                             embeddings=embeddings)
    started = step(f"start the adapter on vLLM {version}", lambda: adapter.start() and None)
    if isinstance(started, Exception):
        return
    try:
        # the claims the adapter keeps on this vLLM line; where they are fewer than the
        # adapter's, the gate reads them from the version's own manifest.json
        manifest = manifest_for_vllm(version, embeddings=embeddings)
        if manifest != default_manifest_path():
            shutil.copyfile(manifest, vdir / MANIFEST_FILE)
        step(
            f"conformance suite against vLLM {version}",
            lambda: run_suite(adapter.address, manifest, vdir, ["-q"]),
        )
        for name in ("case-results.json", "execution-plan.json"):
            if not (vdir / name).is_file():
                console.print(f"  [red]missing {vdir / name}[/red]")
        bench_args = ["--target", adapter.address, "--out", str(vdir)]
        step(
            f"streaming/cancellation latency and e2e smoke on vLLM {version}",
            lambda: _bench(python, "vllm", [*bench_args, *(["--quick"] if quick else [])]),
        )
        facts = {
            "vllm_version": adapter.info.get("vllm_version"),
            "startup_s": round(adapter.started_in_s or 0, 1),
            "rss_bytes": adapter.rss_bytes(),
        }
        (vdir / "adapter.json").write_text(json.dumps(facts, indent=2), encoding="utf-8")
    finally:
        adapter.stop()
    # vLLM's own HTTP API on the same engine, every request compared (twin.py, docs/twin.md)
    step(f"HTTP twin on vLLM {version}",
         lambda: run_twin(python, model, version, vdir / TWIN_DIR))


#: the parity columns of ``--quick`` (the gate's ``nnrp``, its ipc twin and one shared
#: session beside HTTP); the full run measures every column, the suite's recording clients too
QUICK_PARITY_PATHS = (HTTP, NNRP, NNRP_IPC, NNRP_ONE)


def run_parity(version: str, out: Path, *, quick: bool, step: Step) -> None:
    """The HTTP/SSE parity benchmark of ``version`` (its own two servers); never beside a
    build."""
    if not (out / f"vllm-{version}").is_dir():
        return  # the version's environment or adapter failed: already reported
    step(
        f"HTTP/SSE parity on vLLM {version}",
        lambda: _bench(
            vllm_python(version, build=False),
            "parity",
            ["--vllm-version", version, "--out", str(out / f"vllm-{version}"),
             *(["--quick", "--paths", ",".join(QUICK_PARITY_PATHS)] if quick else [])],
        ),
    )


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp release",
        description="The whole release run on the embedded default; writes the evidence and "
        "the release-gate report.",
    )
    p.add_argument("--out", type=Path, default=Path("artifacts/release"))
    # every declared line's lower bound and current line (the release policy's)
    p.add_argument("--versions", default=",".join(TESTED_VERSIONS))
    p.add_argument("--quick", action="store_true", help="short benchmarks (the main job)")
    p.add_argument("--no-parity", action="store_true", help="skip the HTTP/SSE parity run")
    args = p.parse_args(list(argv))
    started = time.monotonic()
    out = args.out.resolve()
    if out.exists():
        # Evidence is regenerated whole: a stale file from an earlier run must not pass.
        for child in out.iterdir():
            if child.is_dir() and (child.name.startswith("vllm-")
                                   or child.name in ("bench", "long-runs")):
                shutil.rmtree(child)
    out.mkdir(parents=True, exist_ok=True)
    log: list[dict[str, Any]] = []
    step = Step(log)
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    shutil.copyfile(default_manifest_path(), out / MANIFEST_FILE)
    # the gate judges the evidence against the policy it was recorded for
    shutil.copyfile(policy_path(), out / POLICY_FILE)
    # every environment side by side in the background (BackgroundBuild); each version's run
    # starts once its own is ready, in the order they become ready
    builder = REPO_ROOT / "scripts" / "vllm-venv"
    building: BackgroundBuild | None = None
    if builder.is_file() and not os.environ.get("VLLM_NNRP_PYTHON"):
        console.print(f"==> vLLM environments {', '.join(versions)}: built side by side in the "
                      "background; each version's run starts when its own is ready")
        building = BackgroundBuild(builder, versions)
        step.beside_build = lambda: building is not None and building.running
    pending = list(versions)
    while pending:
        version = building.next_ready(pending) if building is not None else pending[0]
        pending.remove(version)
        run_version(version, out, quick=args.quick, step=step)
    if building is not None:
        built = building.wait() == 0
        console.print(f"{'[green]✓' if built else '[red]✗'}[/] vLLM environments "
                      f"{', '.join(versions)} (side by side, in the background) "
                      f"[dim]({building.seconds:.0f} s)[/dim]")
        log.insert(0, {"step": f"vLLM environments {', '.join(versions)} (side by side, in the "
                       "background beside the first versions' runs)", "ok": built,
                       "seconds": round(building.seconds, 1), "in_background": True,
                       "environments": environment_facts(versions)})
    # what measures comes after the builds: parity (servers of its own), then the
    # version-independent benchmarks
    if not args.no_parity:
        for version in versions:
            if version in CURRENT_TESTED:
                run_parity(version, out, quick=args.quick, step=step)
    (out / "bench").mkdir(exist_ok=True)
    quick = ["--quick"] if args.quick else []
    step(
        "wire benchmark (naive nnrp-py vs this binding)",
        lambda: _bench(
            sys.executable, "wire", ["--json", str(out / "bench" / "wire.json"), *quick]
        ),
    )
    step(
        "mapper benchmark",
        lambda: _bench(sys.executable, "mapper", ["--json", str(out / "bench" / "mapper.json")]),
    )
    # the long-by-count runs: the test command proves the same properties at a size that
    # proves them, the counts are recorded here, where the gate reads them
    for name, title, sessions, full, short in LONG_RUNS:
        counts = short if args.quick else full
        step(
            f"{title} ({counts[0]:,} operations on {sessions} sessions)",
            functools.partial(
                _bench,
                sys.executable,
                "soak",
                ["--name", name, "--sessions", str(sessions), "--ops", str(counts[0]),
                 "--warmup", str(counts[1]), "--out", str(out / "long-runs" / f"{name}.json"),
                 "--results", str(out / "bench" / f"{name}.json")],
            ),
        )
    (out / "release-run.json").write_text(json.dumps(log, indent=2), encoding="utf-8")
    console.rule("release gate")
    rc = step("release gate", lambda: subprocess.call(
        [
            sys.executable,
            "-m",
            "nnrp_conformance.cli",
            "gate",
            "--evidence",
            str(out),
            "--out",
            str(out),
            "--readme",
            str(REPO_ROOT / "README.md"),
        ]
    ), spinner=False)
    took = time.monotonic() - started
    in_steps = sum(e["seconds"] for e in log if not e.get("in_background"))
    console.print(f"release run: {took:.0f} s in all, {in_steps:.0f} s of it in the steps above")
    # the run's own time (after the gate, which lists this file): where the README's figures
    # of a release run come from, with the environments' build times and disk above
    log.append({"step": "release run in all (scripts/bootstrap not included)", "ok": rc == 0,
                "seconds": round(took, 1)})
    (out / "release-run.json").write_text(json.dumps(log, indent=2), encoding="utf-8")
    console.print(f"release-gate report: {out / 'release-gate.html'}")
    return rc if isinstance(rc, int) else 1
