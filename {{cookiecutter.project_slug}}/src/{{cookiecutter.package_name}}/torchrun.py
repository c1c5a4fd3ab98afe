"""torchrun with an exit code that says how it ended: `python -m {{ cookiecutter.package_name }}.torchrun` takes
torchrun's arguments (the sbatch scripts of launcher=torchrun run it).

A signal to torchrun (Slurm's time limit, scancel, Ctrl-C) is passed on to its workers, which
save and exit 143 or 130 (callbacks/stop.py); torchrun itself then raises SignalException,
which Python prints as a traceback, and exits 1: the job read as a crash. Here torchrun exits
as its workers do, 128 + the signal's number, with one line.

torchrun also killed its workers 30 s after passing a signal on, in the middle of a stop's
save of a large model: here it waits up to 10 minutes (--shutdown-timeout sets another
limit); in a job, Slurm's own grace time after SIGTERM (KillWait) still bounds it.
"""

import os
import signal
import sys

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main


def run() -> None:
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "600")
    try:
        main()
    except SignalException as stop:
        name = signal.Signals(stop.sigval).name
        print(f"torchrun: stopped by {name}, which it passed on to its workers", file=sys.stderr)
        sys.exit(128 + stop.sigval)


if __name__ == "__main__":
    run()
