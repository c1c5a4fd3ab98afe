"""The exceptions that train.py prints as one line, no traceback, and a command-line parser
whose mistakes are one line too."""

import argparse
import re


class SetupError(Exception):
    """A wrong input: one line for the user."""


class CheckpointNotWritten(Exception):
    """A checkpoint could not be written (a full disk, a quota, a folder made read-only): the
    run stops, its earlier checkpoints whole (callbacks/checkpoints.py writes atomically)."""


class TrainingDiverged(Exception):
    """The monitored validation metric is nan or inf (callbacks/diverged.py): the run stops, exit 1, its
    checkpoints from before kept; in a sweep, the point failed and the sweep goes on."""


# The exit code of a run that its +trainer.max_time ended before its epochs or steps, as `timeout`
# exits: not finished (run.py), and a sweep's point in that state is not COMPLETED (local_sweep.py).
TIME_LIMIT_EXIT = 124


class OneLineParser(argparse.ArgumentParser):
    """argparse for the project's commands: a wrong argument prints one line, not usage + error."""

    def error(self, message):
        self.exit(2, f"ERROR: {message} (see {self.prog} --help)\n")


def count(text: str) -> int:
    """argparse's type for a count of steps, repeats, processes: a whole number >= 1 (argparse names the option)."""
    if not text.strip().isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number >= 1. Fix: 1 or more, or leave it out")
    return int(text)


def refused_settings(error: Exception) -> str:
    """Hydra's report of a class of the config that refused its settings as it was built (before any
    training), `Error in call to target '...Trainer': TypeError('...') full_key: trainer`, as one line."""
    said = str(error)
    found = re.search(r"full_key: (\S+)", said)
    key = found.group(1) if found else "the config"
    target = re.search(r"target '([^']+)'", said)
    name = target.group(1).rpartition(".")[2] if target else "its class"
    owner = "Lightning's Trainer" if key == "trainer" else name
    cause = error.__cause__ or error
    reason = " ".join(str(cause).split()).rstrip(".") or type(cause).__name__
    fix = f"change the {key}.* setting it names"
    if isinstance(cause, ImportError):  # trainer.precision=transformer-engine without the package
        fix = f"install the package it names, or {fix}"
    return (
        f"{key}: {owner} refuses these settings: {reason}. Fix: {fix} "
        "(`python train.py --cfg job` shows the settings; HYDRA_FULL_ERROR=1 the traceback)"
    )
