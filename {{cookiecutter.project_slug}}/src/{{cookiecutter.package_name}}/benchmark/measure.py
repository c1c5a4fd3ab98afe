"""Timing and memory shared by both ways of training, so that both are measured alike.

The clock starts when the last warm-up step has finished and stops when the last timed
step has: per-step overheads anywhere in the loop (logging, progress bar, data) count.
On a GPU the device is synchronised at those two points only.

Besides the wall clock, the CPU time of the process (all its threads) is measured over the
same window: on a machine shared with other jobs, wall time depends on their load, while
the CPU time that one way spends per sample hardly does. Counts instead, exact whatever the
load (the timings of such a window are slowed by the counting): count="calls", the Python
function calls of the training thread; count="ops", the torch operators dispatched (on a
GPU nearly each is a kernel launch, a few µs of host time); count="profile", cProfile of
the training thread (profile.py: where the time goes, function by function).
"""

import cProfile
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .profile import own_time_per_step

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """GPU: the allocator's peak. CPU: the process's peak resident memory (Linux: VmHWM)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        try:
            _CLEAR_REFS.write_text("5")  # "5" resets VmHWM to the current resident size
        except OSError:
            pass  # not Linux, or not allowed: the peak is then the process's peak so far


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**10  # kB
    except OSError:
        pass
    return float("nan")


@dataclass
class Measurement:
    samples_per_sec: float  # per wall-clock second
    samples_per_cpu_sec: float  # per second of this process's CPU time
    peak_memory_mib: float


class CountOps(TorchDispatchMode):
    """Counts every torch operator dispatched while it is entered (autograd's too)."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


class StepWindow:
    """Call `step_done()` after every optimizer step; times steps warmup+1 .. warmup+steps.
    count: None (time only), "calls" or "ops" (also counted into `self.counted`), or "profile"
    (`self.profile`: own time and calls per step of each function, profile.py)."""

    def __init__(self, warmup: int, steps: int, batch_size: int, device: torch.device, count: str | None = None):
        self.warmup, self.steps, self.batch_size, self.device = warmup, steps, batch_size, device
        self.done = 0
        self.start = self.stop = None
        self.count = count
        self.counted = 0  # Python function calls or torch operators in the window
        self._ops: CountOps | None = None
        self._profiler: cProfile.Profile | None = None
        self.profile: dict[str, tuple[float, float]] = {}

    def _count_call(self, frame, event, arg) -> None:
        if event == "call":
            self.counted += 1

    def _start_counting(self) -> None:
        if self.count == "calls":
            sys.setprofile(self._count_call)
        elif self.count == "ops":
            self._ops = CountOps()
            self._ops.__enter__()
        elif self.count == "profile":
            self._profiler = cProfile.Profile()
            self._profiler.enable()

    def _stop_counting(self) -> None:
        if self.count == "calls":
            sys.setprofile(None)
        elif self.count == "ops":
            self._ops.__exit__(None, None, None)
            self.counted = self._ops.ops
        elif self.count == "profile":
            self._profiler.disable()
            self.profile = own_time_per_step(self._profiler, self.steps)

    def begin(self) -> None:
        reset_peak_memory(self.device)

    def step_done(self) -> None:
        self.done += 1
        if self.done == self.warmup:
            synchronize(self.device)
            self.start = (time.perf_counter(), time.process_time())
            self._start_counting()
        elif self.done == self.warmup + self.steps:
            self._stop_counting()
            synchronize(self.device)
            self.stop = (time.perf_counter(), time.process_time())

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps

    def result(self) -> Measurement:
        if self.stop is None:
            raise RuntimeError(f"only {self.done} of {self.total_steps} steps ran: use more data or fewer steps")
        samples = self.steps * self.batch_size
        wall, cpu = (stop - start for stop, start in zip(self.stop, self.start, strict=True))
        return Measurement(samples / wall, samples / cpu, peak_memory_mib(self.device))
