"""Timing and memory shared by both ways of training, so that both are measured alike.

The clock starts when the last warm-up step has finished and stops when the last timed
step has: per-step overheads anywhere in the loop (logging, progress bar, data) count.
On a GPU the device is synchronised at those two points only.

Besides the wall clock, the CPU time of the process (all its threads) is measured over the
same window: on a machine shared with other jobs, wall time depends on their load, while
the CPU time that one way spends per sample hardly does. With `count_calls`, the window
counts the Python function calls of the training thread instead: exact, whatever the load
(the timings of such a window are slowed by the counting).
"""

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

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


class StepWindow:
    """Call `step_done()` after every optimizer step; times steps warmup+1 .. warmup+steps."""

    def __init__(self, warmup: int, steps: int, batch_size: int, device: torch.device, count_calls: bool = False):
        self.warmup, self.steps, self.batch_size, self.device = warmup, steps, batch_size, device
        self.done = 0
        self.start = self.stop = None
        self.count_calls = count_calls
        self.calls = 0  # Python function calls in the window, with count_calls

    def _count(self, frame, event, arg) -> None:
        if event == "call":
            self.calls += 1

    def begin(self) -> None:
        reset_peak_memory(self.device)

    def step_done(self) -> None:
        self.done += 1
        if self.done == self.warmup:
            synchronize(self.device)
            self.start = (time.perf_counter(), time.process_time())
            if self.count_calls:
                sys.setprofile(self._count)
        elif self.done == self.warmup + self.steps:
            if self.count_calls:
                sys.setprofile(None)
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
