"""horovodrun that lets its workers finish a stop's save. It takes horovodrun's arguments:
`python -m {{ cookiecutter.package_name }}.horovodrun -np 2 python train.py strategy=horovod`
(the sbatch scripts of launcher=horovodrun run it).

A signal to horovodrun (Ctrl-C, scancel, Slurm's time limit) reaches its workers, which save
and exit 143 (callbacks/stop.py). With gloo, horovodrun killed them 5 s after passing the
signal on, in the middle of the save of a large model, then raised RuntimeError (a traceback,
exit 1). Here it waits up to 10 minutes for them (in a job, Slurm's grace time after SIGTERM,
KillWait, still bounds it) and exits as they do, 128 + the signal's number, with one line.
A worker that fails (a wrong override: one line, exit 2) also ended in a traceback and exit 1:
here horovodrun exits as that worker did, with one line (with MPI, mpirun reports it and exits so).
Horovod's stop also read a worker's exit code as 0 now and then (stop_workers says why), so
that a stopped run ended with exit 0 and no line.
With MPI, horovodrun hands over to Open MPI's mpirun, which kills the workers 1 s after a
signal unless OMPI_MCA_odls_base_sigkill_timeout says otherwise (the sbatch scripts set it;
README, "Horovod", says why this module leaves it alone).
"""

import argparse
import contextlib
import os
import re
import shlex
import signal
import sys
import threading
import time

import psutil

from .launch.errors import OneLineParser

try:
    from horovod.runner import gloo_run
    from horovod.runner.common.util import safe_shell_exec
    from horovod.runner.launch import parse_args, run_commandline
except ImportError:
    sys.exit("horovodrun: Horovod is not installed. Fix: bash scripts/install-horovod.sh")

SECONDS_TO_SAVE = 600


def stop_workers(shell_pid: int) -> None:
    """Horovod's terminate_executor_shell_and_children, but the shell's end is left to its parent.

    gloo starts each worker as `sh -c "env ... python train.py"` from a helper process, which
    waits for that shell to read the worker's exit code. On a signal, Horovod's function, in a
    thread of that helper, stops the worker, then SIGSTOPs, terminates and waits for the shell
    itself. Where that thread's wait took the shell's end first, the helper's own wait found no
    child and read exit code 0 (Python's subprocess does so), and horovodrun ended a stopped
    run with exit 0 and no line; a SIGSTOP that came before the shell's exit left it stopped
    for the whole wait. Here nothing is waited for but by polling, and the shell ends with its
    worker, as a shell does."""
    try:
        shell = psutil.Process(shell_pid)
        workers = shell.children() if shell.name() in ("sh", "dash", "bash") else [shell]  # or it exec'd the worker
    except psutil.NoSuchProcess:
        return
    for worker in workers:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.terminate()  # SIGTERM: the worker saves and exits 143 (callbacks/stop.py)
    deadline = time.monotonic() + SECONDS_TO_SAVE
    while (alive := [worker for worker in workers if _running(worker)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for worker in alive:  # no end within the time: as Horovod does, the worker and what it started
        with contextlib.suppress(psutil.NoSuchProcess):
            for process in [*worker.children(recursive=True), worker]:
                process.kill()


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE  # a zombie has ended: its parent reads its code
    except psutil.NoSuchProcess:
        return False


# At import, not in run(): gloo's helper processes, which ask the workers to stop and then wait
# for them, start by `spawn`, which imports this module again as their main module.
safe_shell_exec.GRACEFUL_TERMINATION_TIME_S = SECONDS_TO_SAVE
safe_shell_exec.terminate_executor_shell_and_children = stop_workers


NAME = "python -m {{ cookiecutter.package_name }}.horovodrun"


def restart_command(command: list[str]) -> str | None:
    """horovodrun's options and the command up to its script: how to start this run again, which
    a stopped worker's line names (an sbatch script's own comes first)."""
    script = next((index for index, arg in enumerate(command) if arg.endswith(".py")), None)
    if script is None:
        return None
    options = sys.argv[1 : len(sys.argv) - len(command)]
    return shlex.join([*shlex.split(NAME), *options, *command[: script + 1]])


def run() -> None:
    sys.argv[0] = NAME  # the name in argparse's lines
    argparse.ArgumentParser.error = OneLineParser.error  # Horovod's parser too: a wrong option in one line
    arguments = parse_args()
    if arguments.num_proc is not None and arguments.num_proc < 1:  # before: started nothing, exit 0
        print(f"horovodrun: -np {arguments.num_proc}: no process to start. Fix: -np <processes>, 1 or more",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    if (command := restart_command(arguments.command)) is not None:
        os.environ.setdefault("RESTART_COMMAND", command)
    received: list[int] = []

    def shutdown_event() -> threading.Event:
        """horovodrun's own (gloo): the signal sets the event that stops the workers; also noted here."""
        event = threading.Event()

        def on_signal(signum, frame):
            received.append(signum)
            event.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, on_signal)
        return event

    gloo_run.register_shutdown_event = shutdown_event
    try:
        run_commandline()
    except RuntimeError as error:  # gloo: "one or more processes exited with non-zero status" (MPI: mpirun says it)
        if received:
            name = signal.Signals(received[0]).name
            print(f"horovodrun: stopped by {name}, which it passed on to its workers", file=sys.stderr)
            sys.exit(128 + received[0])
        failed = re.search(r"Process name: (\S+)\s+Exit code: (-?\d+)", str(error))
        if failed is None:  # horovodrun's own, e.g. "could not connect to some hosts via ssh": one line
            fix = " Fix: -H hosts that this machine reaches by ssh without a password (try: ssh <host> true)"
            print(f"horovodrun: {str(error).rstrip('.')}.{fix if 'ssh' in str(error) else ''}", file=sys.stderr)
            sys.exit(1)
        worker, code = failed[1], int(failed[2])
        print(f"horovodrun: the worker {worker} exited {code} first (the lines above say why)", file=sys.stderr)
        sys.exit(code if code > 0 else 128 - code)  # -N: killed by signal N


if __name__ == "__main__":
    run()
