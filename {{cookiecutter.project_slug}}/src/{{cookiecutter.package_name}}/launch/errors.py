class SetupError(Exception):
    """A wrong input: one line for the user."""
