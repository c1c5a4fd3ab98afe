"""The exceptions that train.py prints as one line, no traceback."""


class SetupError(Exception):
    """A wrong input: one line for the user."""


class CheckpointNotWritten(Exception):
    """A checkpoint could not be written (a full disk, a quota, a folder made read-only): the
    run stops, its earlier checkpoints whole (callbacks/checkpoints.py writes atomically)."""
