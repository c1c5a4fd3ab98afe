"""The exceptions that train.py prints as one line, no traceback, and a command-line parser
whose mistakes are one line too."""

import argparse


class SetupError(Exception):
    """A wrong input: one line for the user."""


class CheckpointNotWritten(Exception):
    """A checkpoint could not be written (a full disk, a quota, a folder made read-only): the
    run stops, its earlier checkpoints whole (callbacks/checkpoints.py writes atomically)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse for the project's commands: a wrong argument prints one line, not usage + error."""

    def error(self, message):
        self.exit(2, f"ERROR: {message} (see {self.prog} --help)\n")
