"""python -m {{ cookiecutter.package_name }}.benchmark [options] [config overrides as for train.py]

Trains the same model on the same data for a fixed number of steps two ways, interleaved
and repeated: a plain PyTorch loop (plain.py) and this project's Lightning path (run.py).
Prints samples/s of each (median of the repeats, summed over processes), their ratio,
peak memory, and the data pipeline's own throughput.

    python -m {{ cookiecutter.package_name }}.benchmark --processes 2 model=autoencoder data.batch_size=256
    python -m {{ cookiecutter.package_name }}.benchmark data=mnist trainer.precision=bf16-mixed
    torchrun --standalone --nproc_per_node=4 -m {{ cookiecutter.package_name }}.benchmark   # what --processes 4 runs
    python -m {{ cookiecutter.package_name }}.benchmark --compile reduce-overhead --repeats 1 --profile profile/
    python -m {{ cookiecutter.package_name }}.benchmark --compile reduce-overhead --ways plain,plain-step,lightning
"""

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile

from ..launch.command_line import check_launch_variables, checked_config, stop
from ..launch.errors import OneLineParser, SetupError, count
from .profile import add_output_options, check_output_paths
from .report import Figures, print_report

WAYS = ("plain", "plain-step", "lightning")
# what the plain loop leaves out: (key, the values that do as the plain loop does, what it lacks)
UNLIKE = (
    ("trainer.accumulate_grad_batches", (1,), "gradient accumulation"),
    ("trainer.gradient_clip_val", (None, 0), "gradient clipping"),
    ("ckpt_path", (None,), "resume: both ways train from new weights for --warmup and --steps"),
    # --compile MODE compiles both ways (speed.matmul_precision and speed.cudnn_benchmark: both take them)
    ("speed.compile", (False,), "torch.compile by speed.compile (--compile MODE compiles both ways)"),
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(prog=f"python -m {__package__}", description=__doc__.split("\n\n")[1], allow_abbrev=False)
    parser.add_argument("--processes", type=count, default=1, help="processes on this machine, started by torchrun")
    parser.add_argument("--steps", type=count, default=100, help="timed steps per repeat (default 100)")
    parser.add_argument("--warmup", type=count, default=10, help="untimed steps before them (default 10)")
    parser.add_argument("--repeats", type=count, default=5, help="repeats of each way, interleaved (default 5)")
    parser.add_argument(
        "--ways",
        default="plain,lightning",
        help="which to run (default plain,lightning); plain-step: the plain loop with its whole step compiled",
    )
    parser.add_argument(
        "--compile",
        metavar="MODE",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        help="torch.compile both ways in this mode (reduce-overhead: CUDA graphs)",
    )
    add_output_options(parser)
    parser.add_argument("--verbose", action="store_true", help="keep Lightning's messages")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="config overrides: model=autoencoder data=mnist data.batch_size=256 trainer.precision=bf16-mixed",
    )
    args = parser.parse_args(argv)
    ways = args.ways.split(",")
    unknown = set(ways) - set(WAYS)
    if unknown or len(set(ways)) < len(ways):
        parser.error(f"--ways {args.ways}: each of {', '.join(WAYS)} at most once, e.g. --ways plain,lightning")
    if "plain-step" in ways and not args.compile:
        parser.error("--ways plain-step compiles the plain loop's whole step: give --compile MODE")
    return args


def relaunch_with_torchrun(processes: int, argv: list[str]) -> int:
    """The same command, once per process, started by torchrun as training would be."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    return subprocess.call([*command, "-m", __package__, *argv])


def compose_config(args: argparse.Namespace, world_size: int, local_world_size: int, output_dir: str):
    """train.py's config with the benchmark's defaults and the user's overrides, checked as
    train.py checks them (SetupError: one line)."""
    chosen = {override.split("=")[0].lstrip("+~") for override in args.overrides}
    defaults = []
    if "data" not in chosen:  # MNIST-shaped and -sized, without a download
        defaults += ["data=synthetic", "data.num_samples=60000"]
    if world_size > 1:
        defaults += [f"trainer.devices={local_world_size}", f"trainer.num_nodes={world_size // local_world_size}"]
        if "strategy" not in chosen:
            defaults.append("strategy=ddp")
    return checked_config([*defaults, *args.overrides, f"output_dir={output_dir}"])


def check_benchmark_config(cfg, args: argparse.Namespace, world_size: int) -> None:
    """What the benchmark itself cannot run, before either way trains: the processes are its own
    (--processes), --compile must suit the strategy, and every process needs a full batch (else
    the plain loop waited forever for one)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf, open_dict

    from ..speed import check_speed

    # What the plain loop does not do: the ratio would compare unlike loops (and ckpt_path a fit of another length).
    for key, plain, what in UNLIKE:
        if (value := OmegaConf.select(cfg, key)) not in plain:
            like = "null" if plain[0] is None else str(plain[0]).lower()  # where the config file sets it
            raise SetupError(
                f"{key}={value}: the benchmark's plain loop has no {what}. Fix: leave out {key} ({key}={like})"
            )
    devices, nodes = cfg.trainer.devices, cfg.trainer.num_nodes
    if isinstance(devices, int) and isinstance(nodes, int) and devices * nodes != world_size:
        raise SetupError(
            f"trainer.devices={devices} x trainer.num_nodes={nodes}: the benchmark starts {world_size} process(es) "
            f"itself (--processes). Fix: --processes {devices * nodes} without trainer.devices / trainer.num_nodes"
        )
    if args.compile:
        speed = cfg.speed.copy()
        with open_dict(speed):
            speed.compile = args.compile
        try:
            check_speed(speed, cfg.strategy)
        except SetupError as error:
            raise SetupError(str(error).replace(f"speed.compile={args.compile}", f"--compile {args.compile}").replace(
                "Fix: speed.compile=false", "Fix: leave out --compile")) from None  # fmt: skip
    instantiate(cfg.data).check_enough_for(world_size, "--processes")


def check_processes(args: argparse.Namespace) -> None:
    """Before torchrun starts --processes: the overrides are right, and each process gets a GPU."""
    import torch

    from ..launch.checks import check_environment

    cfg = compose_config(args, args.processes, args.processes, tempfile.gettempdir())
    check_environment(cfg)
    check_benchmark_config(cfg, args, args.processes)  # once, here, not in every process torchrun starts
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if cfg.trainer.accelerator not in ("auto", "gpu", "cuda") or gpus == 0 or args.processes <= gpus:
        return
    raise SetupError(
        f"--processes {args.processes}: each process needs its own GPU and {gpus} are visible here. "
        f"Fix: --processes {gpus} or fewer, or trainer.accelerator=cpu to run them on the CPU."
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    check_launch_variables()
    try:
        check_output_paths(args.profile, args.json)
        if args.processes > 1 and "LOCAL_RANK" not in os.environ:
            check_processes(args)
            return relaunch_with_torchrun(args.processes, argv)
        return benchmark(args)
    except SetupError as error:  # a wrong override, or what the machine cannot run: one line, exit 2
        stop(str(error))


def benchmark(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    from hydra.utils import instantiate
    from omegaconf import open_dict

    from ..launch.checks import check_environment
    from ..launch.warnings import quiet_benign_messages
    from .lightning_path import timed_run
    from .measure import StepWindow
    from .plain import check_precision, loader_only, train_plain
    from .profile import write_profiles

    if not args.verbose:
        quiet_benign_messages()  # what train.py filters, for the plain way too
        for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
            logging.getLogger(name).setLevel(logging.WARNING)
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    cfg = compose_config(args, world_size, local_world_size, tempfile.gettempdir())
    check_environment(cfg)  # what train.py refuses (a GPU-only strategy on a CPU, ...), before either way runs
    check_benchmark_config(cfg, args, world_size)
    if {"plain", "plain-step"} & set(args.ways.split(",")):
        check_precision(cfg.trainer.precision)
    output_dir = tempfile.mkdtemp(prefix="benchmark-")
    with open_dict(cfg):
        cfg.output_dir = output_dir

    use_gpu = torch.cuda.is_available() and cfg.trainer.accelerator in ("auto", "gpu", "cuda")
    device = torch.device("cuda", local_rank) if use_gpu else torch.device("cpu")
    if use_gpu:
        torch.cuda.set_device(device)
    if world_size > 1:  # Lightning finds the process group made here and uses it
        dist.init_process_group("nccl" if use_gpu else "gloo")

    if int(os.environ.get("RANK", 0)) == 0:
        instantiate(cfg.data).prepare_data()  # a download, or files to unpack: once
    if world_size > 1:
        dist.barrier()

    ways = args.ways.split(",")
    batch_size = cfg.data.batch_size

    def run_way(way: str, count: str | None = None) -> StepWindow:
        """One run of one way; the window that timed (or profiled) its steps."""
        try:
            if way in ("plain", "plain-step"):
                window = StepWindow(args.warmup, args.steps, batch_size, device, count)
                train_plain(cfg, window, device, args.compile, whole_step=way == "plain-step")
                return window
            return timed_run(cfg, args.warmup, args.steps, args.compile, count=count)
        finally:
            if args.compile:
                # The next run compiles as a fresh process would (in its untimed warm-up): on an H100
                # the Lightning way after plain-step ran at 2 steps/s, among the CUDA graphs that
                # plain-step's compiled optimizer step had left (torch's reset drops those too).
                torch.compiler.reset()

    runs = {way: [] for way in ways}
    for repeat in range(args.repeats):
        for way in ways if repeat % 2 == 0 else reversed(ways):  # alternate who goes first
            runs[way].append(run_way(way).result())
    # One more run of each way, profiled: not among the figures.
    profiles = {way: run_way(way, "profile").profile for way in ways} if args.profile else {}
    loader, train_samples, workers = loader_only(cfg, args.steps, device)

    mine = {"runs": {way: [vars(m) for m in measured] for way, measured in runs.items()}, "loader": loader}
    everyone = [None] * world_size
    if world_size > 1:
        dist.all_gather_object(everyone, mine)
    else:
        everyone = [mine]
    shutil.rmtree(output_dir, ignore_errors=True)
    if int(os.environ.get("RANK", 0)) == 0:
        described = settings(args, cfg, device, world_size, train_samples, workers)
        figures = Figures.from_ranks(everyone, ways, settings=described)
        print_report(figures)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures.as_dict(), indent=2))
        if args.profile:
            heading = (
                f"benchmark: {described['model']}, batch {described['batch_size_per_process']}, "
                f"{described['precision']}, compile {described['compile']}, on {described['device']}; "
                f"{described['versions']}; rank 0 of {world_size}"
            )
            write_profiles(args.profile, profiles, figures.pairs(), heading)
    if world_size > 1:
        dist.destroy_process_group()
    return 0


def settings(args: argparse.Namespace, cfg, device, world_size: int, train_samples: int, workers: int) -> dict:
    import platform

    import pytorch_lightning as pl
    import torch

    return {
        "model": cfg.model._target_.rsplit(".", 1)[-1],
        "data": cfg.data._target_.rsplit(".", 1)[-1],
        "batch_size_per_process": cfg.data.batch_size,
        "precision": str(cfg.trainer.precision),
        "compile": args.compile or "no",
        "processes": world_size,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({os.cpu_count()} cores)",
        "threads_per_process": torch.get_num_threads(),
        "steps": args.steps,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "overrides": args.overrides,
        "versions": f"python {platform.python_version()}, torch {torch.__version__}, lightning {pl.__version__}",
        "train_samples": train_samples,
        "loader_workers_per_process": workers,
    }


if __name__ == "__main__":
    sys.exit(main())
