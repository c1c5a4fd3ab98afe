"""Where the host's time per step goes, function by function (`--profile DIR` of the benchmarks).

The benchmarks say how much host time Lightning adds per step; this says where. After the
timed repeats, each way runs once more under cProfile over the same window of steps, and
DIR gets, per way, the functions that take the most time themselves (not counting what
they call) per step, and for each pair the benchmark compares (e.g. `bare-plain`), the
functions that one way spends more time in than the other. C functions count too: the
kernel launches of torch operators, and on a GPU `run_backward` (the backward pass's
launches) and any wait for the device.

cProfile slows every Python call by about as much again, so the microseconds are larger
than the timed ones, most of all for ways with many small calls: compare the rows, not the
totals with the benchmark's. The profiled repeat is not among the timed figures.
"""

import argparse
import cProfile
import pstats
from pathlib import Path

from ..launch.errors import SetupError
from ..launch.paths import unwritable

TOP = 40  # rows per table


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """--json and --profile, which check_output_paths checks before anything runs."""
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="then run each way once more under cProfile: where each spends its time per step, into DIR (profile.py)",
    )


def check_output_paths(profile: Path | None, json_file: Path | None) -> None:
    """Before anything runs: --profile names a folder and --json a file that exist or can be made,
    and be written (else the figures of a whole run were lost to a traceback at its end)."""
    for path, option, folder in ((profile, "--profile", True), (json_file, "--json", False)):
        reason = path and unwritable(path, folder)
        if reason:
            kind, example = ("folder", "profile/") if folder else ("file", "figures.json")
            raise SetupError(f"{option} {path} {reason}. Fix: {option} a {kind} of yours, e.g. {option} {example}")


def own_time_per_step(profile: cProfile.Profile, steps: int) -> dict[str, tuple[float, float]]:
    """{function: (µs of its own time per step, calls per step)} of a profiled window."""
    rows = {}
    for (filename, line, name), (_primitive, calls, own, _cumulative, _callers) in pstats.Stats(profile).stats.items():
        where = filename.split("site-packages/")[-1]
        key = f"{where}:{line}({name})" if line else name  # C functions: "<method 'item' ...>"
        rows[key] = (own / steps * 1e6, calls / steps)
    return rows


def write_profiles(directory: Path, profiles: dict[str, dict], pairs: list[tuple[str, str]], heading: str) -> None:
    """DIR/<way>.txt for each way, and DIR/<a>-<b>.txt: where way a spends more time than way b."""
    directory.mkdir(parents=True, exist_ok=True)
    for way, rows in profiles.items():
        _write(directory / f"{way}.txt", heading, way, rows)
    for first, second in pairs:
        a, b = profiles[first], profiles[second]
        differences = {name: _minus(a.get(name), b.get(name)) for name in a.keys() | b.keys()}
        more = f"; the functions {first} spends more in"
        _write(directory / f"{first}-{second}.txt", heading, f"{first} - {second}", differences, more)


def _minus(a: tuple[float, float] | None, b: tuple[float, float] | None) -> tuple[float, float]:
    a, b = a or (0.0, 0.0), b or (0.0, 0.0)
    return a[0] - b[0], a[1] - b[1]


def _write(path: Path, heading: str, what: str, rows: dict[str, tuple[float, float]], more: str = "") -> None:
    """The TOP functions by µs per step, under the heading and what is shown, with its total."""
    total = sum(us for us, _ in rows.values())
    table = sorted(rows.items(), key=lambda item: -item[1][0])[:TOP]
    caveat = "(under cProfile: about twice the time of each Python call)"
    header = f"{'µs/step':>10} {'calls/step':>10}  function (own time: not counting what it calls)"
    lines = [f"{us:10.1f} {calls:10.1f}  {name}" for name, (us, calls) in table]
    path.write_text("\n".join([heading, f"{what}: {total:.0f} µs/step in all{more}", caveat, header, *lines]) + "\n")
