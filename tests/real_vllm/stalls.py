"""Machine stalls: wall-clock time in which this process (and, measured, the whole VM) did not run.

On the CI machine class (a 2-vCPU microVM), while vLLM 0.22.1's CPU worker runs flat out,
processes stop at times for 5-25 s: an independent process that only sleeps 50 ms in a loop
sees such gaps too, in windows overlapping the client's and the adapter's, and plain CPU or
memory hogs do not cause them
(docs/vllm-cpu.md#machine-stalls). A latency measured across such a gap is the machine's,
not the adapter's. ``StallWatch`` records the gaps from a thread that sleeps ``tick`` seconds
in a loop, so a bound can be judged on the time the machine actually ran; both figures are
printed, never only the corrected one.
"""

from __future__ import annotations

import threading
import time

__all__ = ["MACHINE", "StallWatch"]


class StallWatch:
    """Records every gap longer than ``threshold`` seconds between ``tick``-second sleeps."""

    def __init__(self, tick: float = 0.02, threshold: float = 0.5) -> None:
        self.tick = tick
        self.threshold = threshold
        self.gaps: list[tuple[float, float]] = []  # (start, end), time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> StallWatch:
        """Start watching; a watch already running (or stopped) is left as it is."""
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            if now - last > self.threshold:
                self.gaps.append((last + self.tick, now))
            last = now

    def stalled_between(self, t0: float, t1: float) -> float:
        """Seconds of recorded stalls inside [t0, t1]."""
        return sum(max(0.0, min(end, t1) - max(start, t0)) for start, end in list(self.gaps))

    def summary(self) -> str:
        if not self.gaps:
            return "no machine stall over 0.5 s"
        longest = max(end - start for start, end in self.gaps)
        total = sum(end - start for start, end in self.gaps)
        return f"{len(self.gaps)} machine stalls over {self.threshold} s, {total:.1f} s in all, longest {longest:.1f} s"



# One watch per test process, started by the first test that needs it (``probe.connect``, the
# abort tests' adapter): every test then reads the same record of the machine's stalls.
MACHINE = StallWatch()
