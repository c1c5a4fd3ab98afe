"""horovodrun that lets its workers finish a stop's save. It takes horovodrun's arguments:
`python -m {{ cookiecutter.package_name }}.horovodrun -np 2 python train.py strategy=horovod`
(the sbatch scripts of launcher=horovodrun run it).

A signal to horovodrun (Ctrl-C, scancel, Slurm's time limit) reaches its workers, which save
and exit 143 (callbacks/stop.py). With gloo, horovodrun killed them 5 s after passing the
signal on, in the middle of the save of a large model, then raised RuntimeError (a traceback,
exit 1). Here it waits up to 10 minutes for them (in a job, Slurm's grace time after SIGTERM,
KillWait, still bounds it) and exits as they do, 128 + the signal's number, with one line.
With MPI, horovodrun hands over to Open MPI's mpirun, which kills the workers 1 s after a
signal unless OMPI_MCA_odls_base_sigkill_timeout says otherwise (the sbatch scripts set it;
README, "Horovod", says why this module leaves it alone).
"""

import signal
import sys
import threading

try:
    from horovod.runner import gloo_run
    from horovod.runner.common.util import safe_shell_exec
    from horovod.runner.launch import run_commandline
except ImportError:
    sys.exit("horovodrun: Horovod is not installed. Fix: bash scripts/install-horovod.sh")

SECONDS_TO_SAVE = 600

# At import, not in run(): gloo's helper processes, which ask the workers to stop and then wait
# for them, start by `spawn`, which imports this module again as their main module.
safe_shell_exec.GRACEFUL_TERMINATION_TIME_S = SECONDS_TO_SAVE


def run() -> None:
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
    except RuntimeError:  # "one or more processes exited with non-zero status"
        if not received:
            raise
        name = signal.Signals(received[0]).name
        print(f"horovodrun: stopped by {name}, which it passed on to its workers", file=sys.stderr)
        sys.exit(128 + received[0])


if __name__ == "__main__":
    run()
