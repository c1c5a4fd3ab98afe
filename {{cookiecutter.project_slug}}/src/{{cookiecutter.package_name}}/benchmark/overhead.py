"""python -m {{ cookiecutter.package_name }}.benchmark.overhead [options] [config overrides as for train.py]

What Lightning, and this project on top of it, cost the host per training step. A network
whose step costs almost nothing (one Linear layer) is trained three ways, and the project's
data is fetched a fourth, interleaved and repeated, on data already on the device:

- plain: a loop written by hand (batches cut beforehand)
- bare: Lightning with nothing switched on (no bar, logger, checkpoints or summary)
- project: this project's path, `run.run(cfg)` as train.py calls it (callbacks, progress bar,
  logger, the model's logging, the strategy config), with the same network
- data: the project's batches alone (its DataLoader and normalisation), no training: the
  part of project - bare that is data work, on a CPU mostly arithmetic, on a GPU kernels

All three train with the project's optimizer (`model.optimizer`: AdamW, fused on CUDA).

On a GPU a small model's step is bound by this host time; on a CPU it is a proxy for it.
Printed: microseconds per step (median of the repeats; wall clock and the process's CPU
time), what bare Lightning adds to the plain loop, what the project adds to bare Lightning,
and that less the project's data work. With --count-calls: the Python function calls per
step instead, an exact count that a loaded machine does not disturb; with --count-ops: the
torch operators per step (on a GPU each is about one kernel launch of host time).

    python -m {{ cookiecutter.package_name }}.benchmark.overhead
    python -m {{ cookiecutter.package_name }}.benchmark.overhead strategy=ddp   # DDP on one process
    python -m {{ cookiecutter.package_name }}.benchmark.overhead --count-calls --repeats 1
    python -m {{ cookiecutter.package_name }}.benchmark.overhead --count-ops --repeats 1
    python -m {{ cookiecutter.package_name }}.benchmark.overhead --repeats 1 --profile profile/   # where the time goes
"""

import argparse
import json
import logging
import statistics
import sys
import tempfile
import warnings
from collections.abc import Callable

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import open_dict
from torch import nn
from torch.nn import functional as F

from ..data.memory import check_room
from ..hook_costs import cuda_availability_cached
from ..launch.command_line import stop
from ..launch.errors import OneLineParser, SetupError, count
from . import check_synthetic_data
from .lightning_path import TimeSteps, timed_run
from .measure import StepWindow
from .plain import train_loader
from .profile import add_output_options, check_output_paths, write_profiles

WAYS = ("plain", "bare", "project", "data")
ADDED = ("bare-plain", "project-bare", "project-bare-data")  # "project-bare-data": project - bare - data
COUNTED = {"calls": "python_calls_per_step", "ops": "torch_ops_per_step"}  # --count-calls, --count-ops


class TinyNet(nn.Sequential):
    """MNIST images to 10 logits with one Linear layer: the step is nearly all host time."""

    def __init__(self, num_classes: int = 10):
        super().__init__(nn.Flatten(), nn.Linear(28 * 28, num_classes))


class BareModule(pl.LightningModule):
    """Lightning's minimum: a step that returns the loss, and an optimizer."""

    def __init__(self, optimizer: Callable[..., torch.optim.Optimizer]):
        super().__init__()
        self.net = TinyNet()
        self.optimizer = optimizer

    def training_step(self, batch, batch_idx):
        images, labels = batch
        return F.cross_entropy(self.net(images), labels)

    def configure_optimizers(self):
        return self.optimizer(self.parameters())


def make_batches(count: int, batch_size: int, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """--warmup + --steps batches, made up front: no data work among the timed steps."""
    needed = count * batch_size * 28 * 28 * 4
    available = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    check_room(needed, f"--warmup + --steps = {count} batches of {batch_size}", "fewer --steps", available)
    images = torch.randn(count * batch_size, 1, 28, 28, device=device)
    labels = torch.randint(0, 10, (count * batch_size,), device=device)
    return list(zip(images.split(batch_size), labels.split(batch_size), strict=True))


def run_plain(batches, window: StepWindow, device: torch.device, optimizer: Callable) -> StepWindow:
    net = TinyNet().to(device)
    optimizer = optimizer(net.parameters())
    window.begin()
    # As without Lightning imported: on CPUs no NVML check per step (hook_costs.py). Bare Lightning pays it.
    with cuda_availability_cached(on_gpu=device.type == "cuda"):
        for images, labels in batches[: window.total_steps]:
            loss = F.cross_entropy(net(images), labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            window.step_done()
    return window


def run_bare(batches, window: StepWindow, root: str, optimizer: Callable) -> StepWindow:
    timer = TimeSteps(window.warmup, window.steps, window.batch_size, window.count)
    device = window.device
    loader = torch.utils.data.DataLoader(batches, batch_size=None)  # batches as they are
    trainer = pl.Trainer(
        accelerator=device.type,
        devices=1,
        max_steps=window.total_steps,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        logger=False,
        callbacks=[timer],
        default_root_dir=root,
    )
    trainer.fit(BareModule(optimizer), loader)
    return timer.window


def run_data(cfg, window: StepWindow, device: torch.device) -> StepWindow:
    """The project's batches as the Lightning path gets them (shuffled indices, a batch cut on
    the device, normalised), without training on them."""
    loader, datamodule = train_loader(cfg, device)
    batches = iter(loader)
    window.begin()
    for _ in range(window.total_steps):
        datamodule.on_after_batch_transfer(next(batches), 0)
        window.step_done()
    return window


def project_config(args: argparse.Namespace):
    """train.py's config with the overrides, checked as train.py checks it (SetupError: one line),
    and the network swapped for TinyNet."""
    from ..launch.checks import check_environment
    from ..launch.command_line import checked_config

    sized_by = {"data.num_samples": "--steps and --warmup", "data.batch_size": "--batch-size"}
    check_synthetic_data(args.overrides, "benchmark.overhead", sized_by)  # its other ways train on them too
    samples = (args.warmup + args.steps + 1) * args.batch_size
    defaults = ["data=synthetic", f"data.num_samples={samples}", f"data.batch_size={args.batch_size}", "model=cnn"]
    cfg = checked_config([*defaults, *args.overrides, f"output_dir={tempfile.gettempdir()}"])
    check_environment(cfg)
    with open_dict(cfg):
        cfg.model.net = {"_target_": f"{__package__}.overhead.TinyNet"}
    return cfg


def microseconds_per_step(window: StepWindow) -> tuple[float, float]:
    """(wall clock, process CPU time) per timed step, in µs."""
    wall, cpu = (stop - start for stop, start in zip(window.stop, window.start, strict=True))
    return wall / window.steps * 1e6, cpu / window.steps * 1e6


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog=f"python -m {__package__}.overhead", description=__doc__.split("\n\n")[1], allow_abbrev=False
    )
    parser.add_argument("--steps", type=count, default=500, help="timed steps per repeat (default 500)")
    parser.add_argument("--warmup", type=count, default=50, help="untimed steps before them (default 50)")
    parser.add_argument("--repeats", type=count, default=5, help="repeats of each way, interleaved (default 5)")
    parser.add_argument("--batch-size", type=count, default=128)
    counts = parser.add_mutually_exclusive_group()
    counts.add_argument(
        "--count-calls",
        dest="count",
        action="store_const",
        const="calls",
        help="count the Python function calls per step instead of timing: exact, whatever the machine's load",
    )
    counts.add_argument(
        "--count-ops",
        dest="count",
        action="store_const",
        const="ops",
        help="count the torch operators per step instead of timing (on a GPU, about one kernel launch each)",
    )
    add_output_options(parser)
    parser.add_argument("--verbose", action="store_true", help="keep Lightning's messages and warnings")
    parser.add_argument("overrides", nargs="*", help="config overrides of the project way, e.g. strategy=ddp")
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.verbose:
        warnings.simplefilter("ignore")  # Lightning's advice about the bare way's settings
        for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        check_output_paths(args.profile, args.json)
        cfg = project_config(args)
        with tempfile.TemporaryDirectory(prefix="overhead-") as root:  # its runs' checkpoints and logs
            with open_dict(cfg):
                cfg.output_dir = root
            figures = measure(args, cfg, root)
    except SetupError as error:  # a wrong override, or what the machine cannot run: one line, exit 2
        stop(str(error))
    print_figures(figures)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def run_way(way: str, args: argparse.Namespace, cfg, root: str, batches, optimizer, count: str | None) -> StepWindow:
    """One run of one way; the window that timed (or counted, or profiled) its steps."""
    device = batches[0][0].device
    window = StepWindow(args.warmup, args.steps, args.batch_size, device, count)
    if way == "plain":
        return run_plain(batches, window, device, optimizer)
    if way == "bare":
        return run_bare(batches, window, root, optimizer)
    if way == "data":
        return run_data(cfg, window, device)
    return timed_run(cfg, args.warmup, args.steps, count=count)


def measure(args: argparse.Namespace, cfg, root: str) -> dict:
    use_gpu = torch.cuda.is_available() and cfg.trainer.accelerator in ("auto", "gpu", "cuda")
    device = torch.device("cuda", 0) if use_gpu else torch.device("cpu")
    batches = make_batches(args.warmup + args.steps, args.batch_size, device)
    optimizer = instantiate(cfg.model.optimizer)  # the project's, for every way

    measured = {way: [] for way in WAYS}
    for repeat in range(args.repeats):
        for way in WAYS if repeat % 2 == 0 else reversed(WAYS):  # alternate who goes first
            window = run_way(way, args, cfg, root, batches, optimizer, args.count)
            measured[way].append((window.counted / window.steps,) if args.count else microseconds_per_step(window))
    if args.profile:  # one more run of each way, profiled: not among the figures
        profiles = {way: run_way(way, args, cfg, root, batches, optimizer, "profile").profile for way in WAYS}

    figures = summarise_counts(measured, COUNTED[args.count]) if args.count else summarise(measured)
    figures["settings"] = {
        "device": torch.cuda.get_device_name(device) if use_gpu else "cpu",
        "batch_size": args.batch_size,
        "steps": args.steps,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "overrides": args.overrides,
        "versions": f"torch {torch.__version__}, lightning {pl.__version__}",
    }
    if args.profile:
        ran = figures["settings"]
        heading = f"benchmark.overhead: batch {ran['batch_size']} on {ran['device']}, {ran['steps']} steps"
        heading += f"; {ran['versions']}"
        write_profiles(args.profile, profiles, [("bare", "plain"), ("project", "bare"), ("project", "plain")], heading)
    return figures


def summarise(measured: dict[str, list[tuple[float, float]]]) -> dict:
    """Medians per way, and the added cost as the median of the per-repeat differences
    (each repeat's ways ran back to back, under the same machine load)."""
    figures = {"us_per_step": {}, "added_us_per_step": {}}
    for way, runs in measured.items():
        figures["us_per_step"][way] = {
            "wall": statistics.median(wall for wall, _ in runs),
            "cpu": statistics.median(cpu for _, cpu in runs),
            "wall_repeats": [wall for wall, _ in runs],
        }
    for name in ADDED:
        way, *minus = name.split("-")  # in each repeat
        added = [
            [run[clock] - sum(measured[other][repeat][clock] for other in minus) for clock in (0, 1)]
            for repeat, run in enumerate(measured[way])
        ]
        figures["added_us_per_step"][name] = {
            "wall": statistics.median(wall for wall, _ in added),
            "cpu": statistics.median(cpu for _, cpu in added),
        }
    return figures


def summarise_counts(measured: dict[str, list[tuple[float]]], key: str) -> dict:
    counts = {way: statistics.median(count for (count,) in runs) for way, runs in measured.items()}
    for name in ADDED:
        way, *minus = name.split("-")
        counts[f"added {name}"] = counts[way] - sum(counts[other] for other in minus)
    return {key: counts}


def print_figures(figures: dict) -> None:
    s = figures["settings"]
    print(
        f"\nper-step host cost: 1 Linear layer, batch {s['batch_size']} on {s['device']}, {s['threads']} thread(s); "
        f"{s['steps']} timed steps after {s['warmup']}, {s['repeats']} interleaved repeats; {s['versions']}"
    )
    for key, heading in (("python_calls_per_step", "Python calls/step"), ("torch_ops_per_step", "torch ops/step")):
        if key in figures:
            print(f"{'way':<24} {heading:>18}")
            for way, count in figures[key].items():
                print(f"{way:<24} {count:>18.1f}")
            return
    print(f"{'way':<24} {'us/step':>9} {'CPU us/step':>12}")
    for way, value in figures["us_per_step"].items():
        print(f"{way:<24} {value['wall']:>9.1f} {value['cpu']:>12.1f}")
    for name, value in figures["added_us_per_step"].items():
        print(f"{'added ' + name:<24} {value['wall']:>9.1f} {value['cpu']:>12.1f}")


if __name__ == "__main__":
    sys.exit(main())
