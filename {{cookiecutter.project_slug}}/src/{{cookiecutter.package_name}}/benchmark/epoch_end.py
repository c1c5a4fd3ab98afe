"""python -m {{ cookiecutter.package_name }}.benchmark.epoch_end [options] [config overrides as for train.py]

The host's work between two epochs on this project's path (`run.run(cfg)`, as train.py runs
it, validation off as in the benchmark): from the end of an epoch's last batch to the start
of the next epoch's first, where `last.ckpt`, the loggers, the progress bar and the callbacks
end the epoch and the loader starts the next one. The GPU runs what the host queued before;
once that is done it idles until the next epoch's first step, and it idles through all of
it where anything there waits for the GPU. An MNIST epoch at batch 1024 is 58 steps.

Printed: the median over the epoch ends after the first (which does one-off work) of the
milliseconds and, with --count-calls, the Python function calls of the training thread
(exact, whatever the machine's load).

    python -m {{ cookiecutter.package_name }}.benchmark.epoch_end
    python -m {{ cookiecutter.package_name }}.benchmark.epoch_end --count-calls '~callbacks.throughput'
"""

import argparse
import statistics
import sys
import tempfile
import time
import warnings

import pytorch_lightning as pl
import torch
from omegaconf import open_dict

from ..data.memory import check_room
from ..data.synthetic import bytes_to_make
from ..launch.command_line import stop
from ..launch.errors import OneLineParser, SetupError
from . import check_synthetic_data
from .lightning_path import without_validation


class TimeEpochEnds(pl.Callback):
    """Times (and with count_calls counts the Python calls of) each gap between epochs."""

    def __init__(self, batches: int, count_calls: bool = False):
        self.batches, self.count_calls = batches, count_calls
        self.gaps: list[tuple[float, int]] = []  # (seconds, calls) per epoch end
        self._start: float | None = None
        self._calls = 0

    def _count(self, frame, event, arg) -> None:
        if event == "call":
            self._calls += 1

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if batch_idx == self.batches - 1:
            self._calls = 0
            if self.count_calls:
                sys.setprofile(self._count)
            self._start = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if batch_idx == 0 and self._start is not None:
            seconds = time.perf_counter() - self._start
            sys.setprofile(None)
            self.gaps.append((seconds, self._calls))
            self._start = None

    def on_train_end(self, trainer, pl_module):
        sys.setprofile(None)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog=f"python -m {__package__}.epoch_end", description=__doc__.split("\n\n")[1], allow_abbrev=False
    )
    parser.add_argument("--epochs", type=int, default=12, help="epochs to train (default 12: 11 epoch ends)")
    parser.add_argument("--batches", type=int, default=20, help="batches per epoch (default 20)")
    parser.add_argument("--count-calls", action="store_true", help="also count the Python calls of each gap")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. model=autoencoder data.batch_size=1024")
    args = parser.parse_args(argv)
    if args.epochs < 3 or args.batches < 1:
        parser.error("--epochs must be at least 3 (the first epoch end is not counted), --batches at least 1")
    return args


def epoch_end_config(args: argparse.Namespace, output_dir: str):
    """train.py's config with the overrides, checked as train.py checks it (SetupError: one line)."""
    from ..launch.checks import check_environment
    from ..launch.command_line import checked_config

    check_synthetic_data(args.overrides, "benchmark.epoch_end", {"data.num_samples": "--batches"})
    cfg = checked_config(["data=synthetic", *args.overrides, f"output_dir={output_dir}"])
    check_environment(cfg)
    with open_dict(cfg):
        cfg.data.num_samples = args.batches * cfg.data.batch_size
        cfg.trainer.max_epochs, cfg.trainer.max_steps = args.epochs, -1
        cfg.trainer.limit_train_batches = None
        without_validation(cfg)
        cfg.callbacks.time_epoch_ends = {
            "_target_": f"{__name__}.TimeEpochEnds",
            "batches": args.batches,
            "count_calls": args.count_calls,
        }
    needed = bytes_to_make(cfg.data.num_samples, cfg.data.image_shape)
    check_room(needed, f"--batches {args.batches} of {cfg.data.batch_size}", "fewer --batches")
    return cfg


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from ..run import run

    warnings.simplefilter("ignore")  # Lightning's advice about a run without validation
    with tempfile.TemporaryDirectory(prefix="epoch-end-") as root:
        try:
            cfg = epoch_end_config(args, root)
        except SetupError as error:  # a wrong override, or what the machine cannot run: one line, exit 2
            stop(str(error))
        trainer = run(cfg)
    (timer,) = [callback for callback in trainer.callbacks if isinstance(callback, TimeEpochEnds)]
    gaps = timer.gaps[1:]
    milliseconds = statistics.median(seconds for seconds, _ in gaps) * 1e3
    line = f"epoch ends: {len(gaps)} after the first, median {milliseconds:.2f} ms"
    if args.count_calls:  # counting slows the Python it counts: compare times without it
        line += f", {statistics.median(calls for _, calls in gaps):.0f} Python calls (timed while counting)"
    setting = f"batch {cfg.data.batch_size}, {args.batches} batches an epoch, on {trainer.strategy.root_device}"
    print(f"\n{line}; {setting}; torch {torch.__version__}, lightning {pl.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
