"""python -m {{ cookiecutter.package_name }}.benchmark.scaling --processes 1,2,4 [config overrides]

Runs the benchmark's Lightning path with 1, 2, ... processes (each started by torchrun, as
training is) and prints the scaling table: time per epoch, speed-up and efficiency. The
batch per process stays the same, so N processes share each epoch N ways.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ..launch.command_line import stop
from ..launch.errors import OneLineParser, SetupError, count
from .__main__ import check_processes


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(prog=f"python -m {__package__}.scaling", description=__doc__.split("\n\n")[1])
    parser.add_argument("--processes", default="1,2", help="process counts to run, e.g. 1,2,4,8 (default 1,2)")
    parser.add_argument("--steps", type=count, default=100)
    parser.add_argument("--warmup", type=count, default=10)
    parser.add_argument("--repeats", type=count, default=3)
    parser.add_argument("--way", choices=["lightning", "plain"], default="lightning")
    parser.add_argument("overrides", nargs="*", help="config overrides, as for the benchmark and train.py")
    args = parser.parse_args(argv)
    counts = args.processes.split(",")
    if not all(part.isdigit() and int(part) >= 1 for part in counts):
        parser.error(f"--processes {args.processes}: whole numbers >= 1, separated by commas, e.g. --processes 1,2,4")
    args.processes = [int(part) for part in counts]
    return args


def measure(processes: int, args: argparse.Namespace, json_path: Path) -> dict | None:
    """The benchmark's figures with this many processes; None if it failed (it said why)."""
    command = [sys.executable, "-m", __package__, f"--processes={processes}", f"--ways={args.way}"]
    command += [f"--steps={args.steps}", f"--warmup={args.warmup}", f"--repeats={args.repeats}"]
    if subprocess.run([*command, f"--json={json_path}", *args.overrides]).returncode != 0:
        return None
    return json.loads(json_path.read_text())


def table(rows: list[tuple[int, float, int]]) -> str:
    """rows: (processes, samples/s in total, samples per epoch). Markdown, as in docs/performance.md."""
    lines = ["| processes | samples/s | time per epoch (s) | speed-up | efficiency |", "|---|---|---|---|---|"]
    base_time = None
    for processes, samples_per_sec, epoch_samples in rows:
        epoch_time = epoch_samples / samples_per_sec
        base_time = base_time or epoch_time * rows[0][0]  # the time one process would take
        speed_up = base_time / epoch_time
        lines.append(
            f"| {processes} | {samples_per_sec:.0f} | {epoch_time:.2f} | {speed_up:.2f} | {speed_up / processes:.0%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:  # every count, before any run (a later one refused after the first had trained): one line, exit 2
        for processes in args.processes:
            check_processes(argparse.Namespace(**{**vars(args), "processes": processes, "compile": None}))
    except SetupError as error:
        stop(str(error))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for processes in args.processes:
            figures = measure(processes, args, Path(tmp) / f"{processes}.json")
            if figures is None:
                stop(f"the benchmark with --processes {processes} failed (its own message is above); no table")
            rows.append((processes, figures["ways"][args.way]["median"], figures["settings"]["train_samples"]))
    print(f"\nscaling of the {args.way} path, {' '.join(args.overrides) or 'default config'}:")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
