"""torchrun with an exit code that says how it ended: `python -m {{ cookiecutter.package_name }}.torchrun` takes
torchrun's arguments (the sbatch scripts of launcher=torchrun run it).

A signal to torchrun (Slurm's time limit, scancel, Ctrl-C) is passed on to its workers, which
save and exit 143 or 130 (callbacks/stop.py); torchrun itself then raises SignalException,
which Python prints as a traceback, and exits 1: the job read as a crash. Here torchrun exits
as its workers do, 128 + the signal's number, with one line. A worker that fails (a wrong
override: one line, exit 2) also ended in torchrun's traceback and exit 1: here torchrun exits
as that worker did, with one line.

torchrun also killed its workers 30 s after passing a signal on, in the middle of a stop's
save of a large model: here it waits up to 10 minutes (--shutdown-timeout sets another
limit); in a job, Slurm's own grace time after SIGTERM (KillWait) still bounds it.
"""

import argparse
import os
import shlex
import signal
import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import determine_local_world_size, main, parse_args, parse_min_max_nnodes

from .launch.errors import OneLineParser


def _nodes(value: str) -> None:
    least, most = parse_min_max_nnodes(value)
    if not 0 < least <= most:
        raise ValueError(f"{least} to {most} nodes")


def _processes(value: str) -> None:
    if determine_local_world_size(value) < 1:  # torch's own: a bare AssertionError later
        raise ValueError("no processes")


def _restarts(value: int) -> None:
    if value < 0:
        raise ValueError("fewer than 0 restarts")


def _interval(value: float) -> None:
    if not value > 0:  # torch's own: a bare AssertionError
        raise ValueError("not a time")


def _port(value: int | None) -> None:
    if value is not None and not 0 < value < 65536:
        raise ValueError("not a port")


# Checked before torch's own checks, which raised a traceback: option -> (its check, the fix).
CHECKS = {
    "nnodes": (_nodes, "--nnodes=<nodes>, or <min>:<max>"),
    "nproc_per_node": (_processes, "--nproc_per_node=<processes per node, 1 or more>, or gpu (one per GPU)"),
    "max_restarts": (_restarts, "--max-restarts=<0 or more>"),
    "monitor_interval": (_interval, "--monitor-interval=<seconds, more than 0>"),
    "master_port": (_port, "--master-port=<a free port, 1 to 65535, e.g. 29500>"),
}


def run() -> None:
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "600")
    sys.argv[0] = "python -m {{ cookiecutter.package_name }}.torchrun"  # the name in argparse's lines
    argparse.ArgumentParser.error = OneLineParser.error  # torch's parser too: a wrong option in one line
    options = parse_args(sys.argv[1:])
    for option, (check, fix) in CHECKS.items():
        value = getattr(options, option)
        try:
            check(value)
        except (ValueError, RuntimeError) as error:
            print(f"torchrun: --{option}={value}: {str(error).rstrip('.')}. Fix: {fix}", file=sys.stderr)
            sys.exit(2)
    # How to start this run again, which a stopped worker's line names (an sbatch script's own comes first).
    launch = [*shlex.split(sys.argv[0]), *sys.argv[1 : len(sys.argv) - len(options.training_script_args)]]
    os.environ.setdefault("RESTART_COMMAND", shlex.join(launch))
    try:
        main()
    except ChildFailedError as failed:  # the worker's own output above says why
        rank, failure = failed.get_first_failure()
        code = failure.exitcode if failure.exitcode > 0 else 128 - failure.exitcode  # -N: killed by signal N
        how = f"was killed by {failure.signal_name()}" if failure.exitcode < 0 else f"exited {failure.exitcode}"
        print(f"torchrun: the worker of rank {rank} {how} first (its lines above say why)", file=sys.stderr)
        sys.exit(code)
    except Exception as error:
        stop = signal_behind(error)
        if stop is None and os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        if stop is None:  # before or while it started its workers: an option it cannot use (--rdzv-backend=foo)
            said = (str(error).strip().splitlines() or [""])[0]
            print(
                f"torchrun: {type(error).__name__}: {said} (with {shlex.join(sys.argv[1:])}). Fix: what it names "
                f"(a port in use: another --master-port; {sys.argv[0]} --help lists the options); HYDRA_FULL_ERROR=1 "
                "shows the traceback",
                file=sys.stderr,
            )
            sys.exit(1)
        name = signal.Signals(stop.sigval).name
        print(f"torchrun: stopped by {name}, which it passed on to its workers", file=sys.stderr)
        sys.exit(128 + stop.sigval)


def signal_behind(error: BaseException | None) -> SignalException | None:
    """The SignalException, also behind an error that torch raised while it handled one: its
    metrics wrapper raises UnboundLocalError when the signal comes before its timer started (seen
    once in CI: a traceback and exit 1, though the workers had saved)."""
    while error is not None and not isinstance(error, SignalException):
        error = error.__context__
    return error


if __name__ == "__main__":
    run()
