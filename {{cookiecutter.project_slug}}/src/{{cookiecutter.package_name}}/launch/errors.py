"""The one exception for a wrong input: train.py prints its message as one line, no traceback."""


class SetupError(Exception):
    """A wrong input: one line for the user."""
