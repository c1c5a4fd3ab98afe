"""Whether a path that a command will write can be written: checked before the command runs, so
that a long run never ends in a traceback where its results were to be saved."""

import tempfile
from pathlib import Path


def unwritable(path: Path, folder: bool) -> str | None:
    """Why `path` (a folder, or a file) cannot be written or made here; None where it can."""
    path = Path(path).expanduser()
    existing = next(parent for parent in (path, *path.absolute().parents) if parent.exists())
    if existing == path and path.is_dir() != folder:
        return "is a file, not a folder" if folder else "is a folder, not a file"
    if existing != path and not existing.is_dir():
        return f"cannot be made: {existing} is a file"
    try:  # a real try, not os.access: root passes that everywhere, also on read-only file systems
        tempfile.TemporaryDirectory(dir=existing if existing.is_dir() else existing.parent).cleanup()
    except OSError as error:
        return f"cannot be written: {existing} is not writable ({error.strerror})"
    return None
