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
With MPI, Horovod's horovodrun hands over to Open MPI's mpirun (the process becomes a shell that
runs it), which kills the workers 1 s after a signal unless OMPI_MCA_odls_base_sigkill_timeout
says otherwise (the sbatch scripts set it; README, "Horovod", says why this module leaves it
alone). Here mpirun runs as a child instead (run_mpirun says why).
"""

import argparse
import contextlib
import importlib
import os
import re
import shlex
import signal
import subprocess
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
        # A shell that exec'd the worker is the worker; one that has not started it yet is ended.
        workers = (shell.children() or [shell]) if shell.name() in ("sh", "dash", "bash") else [shell]
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


class MpirunAsAChild:
    """horovod.runner.mpi_run's `os` module, but for its execve, the last step of Horovod's MPI
    launch (`/bin/sh -c "mpirun ..."` in place of this process): run_mpirun instead."""

    def __init__(self, workers: list[str]):
        self.workers = workers

    def __getattr__(self, name):
        return getattr(os, name)

    def execve(self, path, args, env):
        run_mpirun(args[-1], env, self.workers)


def run_mpirun(command: str, env: dict[str, str], workers: list[str]) -> None:
    """Run Horovod's mpirun command as a child; a signal goes to the workers on this node.

    As Horovod ran it, a signal ended the shell at once and passed nothing on: mpirun and the
    workers trained on, unsignalled (at a terminal, under `timeout` or a `kill`). Open MPI 4.1's
    mpirun is no better a messenger: signalled, it stops passing on the workers' output (a
    worker that writes much then blocks); signalled twice in a row, it exits and passes nothing
    on; and after a worker's non-zero exit it waits twice its odls_base_sigkill_timeout (the
    scripts': 10 minutes) before it ends. So mpirun runs in a session of its own, which a
    terminal's Ctrl-C does not reach, and each signal goes to the workers on this node
    (`workers`: their command line), which agree with the others on where to stop
    (callbacks/agreement.py). Once they (rank 0, which saves, among them) have ended, mpirun's
    wait is cut short, and this exits 128 + the signal's number. Where none of them runs here
    (mpirun started them all through srun, as in a Slurm job, or ssh), mpirun gets the signal,
    and this waits for it. (In a job Slurm signals every process itself.)"""
    received: list[int] = []
    here: list[psutil.Process] = []  # the workers on this node, found at the first signal
    mpirun: subprocess.Popen | None = None

    def pass_on(signum: int) -> None:
        if mpirun is None:
            return  # once it has started
        if not here:
            here.extend(_workers_below(mpirun.pid, workers))
        for process in here or [psutil.Process(mpirun.pid)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signum)

    def on_signal(signum, frame):
        received.append(signum)
        pass_on(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    mpirun = subprocess.Popen(["/bin/sh", "-c", f"exec {command}"], env=env, start_new_session=True)
    if received:  # while it started
        pass_on(received[0])
    while mpirun.poll() is None:
        if received and here and not any(map(_running, here)):
            os.killpg(mpirun.pid, signal.SIGKILL)  # what is left is mpirun's waiting
            mpirun.wait()
            break
        time.sleep(0.2)
    if received:
        name = signal.Signals(received[0]).name
        print(f"horovodrun: stopped by {name}, which it passed on to its workers", file=sys.stderr)
        sys.exit(128 + received[0])
    sys.exit(mpirun.returncode if mpirun.returncode >= 0 else 128 - mpirun.returncode)


def _workers_below(mpirun: int, workers: list[str]) -> list[psutil.Process]:
    """mpirun's processes that run the workers' command line: its workers on this node."""
    found = []
    with contextlib.suppress(psutil.NoSuchProcess):
        for process in psutil.Process(mpirun).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if process.cmdline() == workers:
                    found.append(process)
    return found


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
    importlib.import_module("horovod.runner.mpi_run").os = MpirunAsAChild(arguments.command)
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
