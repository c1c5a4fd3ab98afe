"""Whether a data set made in memory fits: torch's failed allocation is a traceback, and where
Linux overcommits memory, the kernel may instead kill the process later without a word."""

import re
from pathlib import Path

from ..launch.errors import SetupError

GIB = 2**30


def available_memory() -> int | None:
    """Bytes this process may use: the machine's available memory, or a cgroup's limit where that
    is lower (a Slurm job's --mem). None where neither can be read."""
    figures = []
    try:
        figures.append(int(re.search(r"MemAvailable:\s+(\d+) kB", Path("/proc/meminfo").read_text())[1]) * 1024)
    except (OSError, TypeError):
        pass
    try:
        groups = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        groups = []
    for line in groups:  # "0::/path" (cgroup v2) or "4:memory:/path" (v1)
        _number, controllers, path = line.split(":", 2)
        if controllers == "":
            limit = Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max"
        elif "memory" in controllers.split(","):
            limit = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes"
        else:
            continue
        try:
            figures.append(int(limit.read_text()))  # "max": no limit (ValueError)
        except (OSError, ValueError):
            pass
    return min(figures) if figures else None


def check_room(needed: int, given: str, fix: str, available: int | None = None) -> None:
    """SetupError naming `given` (e.g. data.num_samples=...) where `needed` bytes do not fit."""
    available = available_memory() if available is None else available
    if available is not None and needed > available:
        raise SetupError(
            f"{given}: about {needed / GIB:.1f} GiB to make in memory, and {available / GIB:.1f} GiB are "
            f"available here. Fix: {fix}"
        )
