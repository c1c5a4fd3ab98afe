"""One run, one directory: a new run never writes where another run's checkpoints are.

- A new run refuses a directory that holds checkpoints; resuming is explicit (`ckpt_path=last`,
  `resume=<run dir>`) or automatic for a requeued Slurm job or a restarted torchrun.
- `resume=outputs/<id>` starts again with the overrides of the start that wrote the checkpoint
  it resumes from, the new ones on top (a later start that failed before it saved anything
  changed nothing); the run's first `.hydra/` stays as it was, and every resume records its
  own config in `.hydra/resumes/<time>/`.
- One process at a time: a start holds a lock on its run directory while it lives, and a
  second start of the same run (two resumes at once) is refused; before, each overwrote the
  other's last.ckpt, one of them with an older step.
- A refused start leaves nothing behind (no empty run directory, no `.hydra/resumes/<time>`,
  whose overrides the next `resume=` would otherwise take as the run's).
"""

import errno
import fcntl
import os
import re
import shlex
import shutil
import sys
from datetime import datetime
from pathlib import Path

import yaml

from .environment import global_rank, restarted
from .errors import SetupError

_subdirs: dict[str, str] = {}  # run dir -> this start's config folder (resolved more than once)
_held: dict[Path, int] = {}  # run dir -> the open descriptor that holds its lock, while this process lives
_made_parents: set[Path] = set()  # folders above the run's that this start makes (note_new_parents)


def shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    path = Path(path).absolute()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def resume_command(run_dir: Path, restart: str | None = None) -> str:
    """The command that continues a run, ready to paste into a shell (a folder with spaces quoted),
    started as this run was: `restart`, else RESTART_COMMAND, which the sbatch scripts (`sbatch
    <script>`), the project's torchrun and horovodrun, a Slurm sweep's points and srun's tasks started
    from a shell (launch/sweeps.py) set; else `python train.py`. (In a job, `python train.py` would
    have trained on the login node.)"""
    restart = restart or os.environ.get("RESTART_COMMAND") or "python train.py"
    return f"{restart} {shlex.quote(f'resume={shown(run_dir)}')}"


def _hydra_value(value: str) -> str:
    """A value as Hydra's override grammar reads it back as this text: quoted, so that a folder
    named `run (1)`, `a,b` or `1e3` stays that name (unquoted: a parse error, a sweep, a float)."""
    # Hydra's escapes in a quoted string: \' for a quote; backslashes only where a quote follows.
    value = re.sub(r"(\\*)'", lambda found: found[1] * 2 + "\\'", value)
    return "'" + re.sub(r"(\\+)$", lambda found: found[1] * 2, value) + "'"


def output_subdir(run_dir: str) -> str | None:
    """Hydra's hydra.output_subdir: `.hydra` for a new run, `.hydra/resumes/<time>` when the run
    already has one (a resume or a requeue). Only rank 0 writes it; the others would repeat it."""
    if global_rank() != 0:
        return None
    if run_dir not in _subdirs:
        # The start's lock on the run directory (which Hydra has made), before Hydra writes the start's
        # record: of two new starts at once (an array job's tasks given one run_id=), the one that will
        # train writes .hydra; the other, refused, removes its own record, not the run's.
        first = hold(Path(run_dir)) and not (Path(run_dir) / ".hydra" / "config.yaml").exists()
        _subdirs[run_dir] = ".hydra" if first else f".hydra/resumes/{datetime.now():%Y-%m-%d_%H-%M-%S}_{os.getpid()}"
    return _subdirs[run_dir]


def _key(override: str) -> str:
    """`+a.b=1`, `++a.b=1`, `~a.b`, `a.b=1` -> `a.b`."""
    return override.lstrip("+~").split("=", 1)[0]


def _unquoted(value: str) -> str:
    """resume='/a b/run': quoted for Hydra, as other keys take a path with spaces (it was taken with
    its quotes). Unquoted, the value is the path as typed."""
    if len(value) < 2 or value[0] != value[-1] or value[0] not in "'\"":
        return value
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return str(OverridesParser.create().parse_override(f"resume={value}").value())
    except Exception:  # not Hydra's quoting after all: the path as typed
        return value


# The overrides that the start of a run gave, by the folder of the run that resume= continues: a
# check that refuses one of them says so, and that the fix is to drop it (~key), not to type it again.
RESUMED: dict[str, list[str]] = {}


def resume_overrides(argv: list[str]) -> list[str]:
    """`resume=DIR [overrides]` -> the overrides of the start that wrote DIR's newest checkpoint
    (its last start if none), then `run_id`, `output_root` and `ckpt_path=last` of DIR, then the
    new overrides (which win)."""
    RESUMED.clear()
    given = [arg for arg in argv if arg.startswith("resume=")]
    if not given:
        return argv
    if not given[-1].split("=", 1)[1].strip():
        raise SetupError("resume='': the folder of the run to continue. Fix: resume=outputs/<run_id> (its folder)")
    if len(set(given)) > 1:  # before, the last one was resumed without a word
        raise SetupError(f"{' '.join(given)}: one run at a time. Fix: one of them, e.g. {given[0]}")
    run_dir = Path(_unquoted(given[-1].split("=", 1)[1])).expanduser()
    records = [run_dir / ".hydra" / "overrides.yaml", *sorted(run_dir.glob(".hydra/resumes/*/overrides.yaml"))]
    records = [path for path in records if path.is_file()]
    runs = [folder for folder in run_dir.absolute().parents if (folder / ".hydra" / "overrides.yaml").is_file()]
    if not records and runs:  # a checkpoint file, or its checkpoints/ folder
        run = shown(runs[0])
        start_from = f", or a new run from this checkpoint: ckpt_path={run_dir}" if run_dir.is_file() else ""
        raise SetupError(f"resume={run_dir}: inside the run {run}, not its folder. Fix: resume={run}{start_from}")
    if not records and (inside := _runs_with_checkpoints(run_dir)):  # output_root itself
        raise SetupError(
            f"resume={run_dir}: a folder of runs, not a run. Fix: resume={_in(run_dir)}, one of: {_listed(inside)}"
        )
    root = next((arg.split("=", 1)[1] for arg in argv if arg.startswith("output_root=")), DEFAULT_OUTPUT_ROOT)
    under = Path(root) / run_dir  # resume=<run_id>, for the run's folder in output_root
    if not records and not run_dir.is_absolute() and (under / ".hydra" / "overrides.yaml").is_file():
        raise SetupError(f"resume={run_dir}: no run was started there; {shown(under)} is that run. Fix: resume={under}")
    if not records:
        listed = _runs_with_checkpoints(run_dir.parent)
        fix = f"resume={_in(run_dir.parent)}, one of: {_listed(listed)}"
        if not listed:
            fix = f"a run's folder ({shown(run_dir.parent)} holds none with checkpoints), or a new run without resume="
        missing = run_dir / ".hydra" / "overrides.yaml"
        raise SetupError(f"resume={run_dir}: no run was started there ({missing} is missing). Fix: {fix}")
    new = [arg for arg in argv if not arg.startswith("resume=")]
    mine = {"run_id", "output_root", "ckpt_path"}
    replaced = {_key(arg) for arg in new if "=" in arg or arg.startswith("~")} | mine
    from ..callbacks.checkpoints import newest_checkpoint

    newest = newest_checkpoint(run_dir)  # read once, for both uses below
    record = _record_of_newest_checkpoint(run_dir, newest, records)
    saved = [*(yaml.safe_load(record.read_text()) or []), *_config_search_path(record)]
    started_from = [_unquoted(arg.split("=", 1)[1]) for arg in saved if _key(arg) == "ckpt_path" and "=" in arg]
    # A key the start added (+key=...) exists only through that override: a new value keeps the +.
    added = {_key(arg) for arg in saved if arg.startswith("+") and not arg.startswith("++")}
    new = [_still_added(arg) if _key(arg) in added else arg for arg in new]
    new = [arg for arg in new if not (arg.startswith("~") and _key(arg) in added)]  # ~key: not added again
    saved = [arg for arg in saved if _key(arg) not in replaced]
    RESUMED[shown(run_dir)] = saved
    place = {"output_root": str(run_dir.absolute().parent), "run_id": run_dir.name, "ckpt_path": "last"}
    _check_not_elsewhere(run_dir, [arg for arg in new if _key(arg) in mine], place)
    # Hydra reads the overrides as one group: its options (--cfg job, -m) go first.
    options = [arg for arg in new if arg.startswith("-") or not ("=" in arg or arg.startswith("~"))]
    if "-m" in options or "--multirun" in options:
        raise SetupError(
            f"resume={shown(run_dir)} with -m: a resume continues one run in its folder, a sweep starts new ones. "
            "Fix: leave out -m, or sweep with new runs from its checkpoint: -m ckpt_path="
            f"{shown(run_dir / 'checkpoints' / 'last.ckpt')} <overrides>"
        )
    if newest is None:  # stopped before its first save: nothing to lose, start it again
        # as it started: a fine-tuning run from the checkpoint it was given (before, from new weights)
        start = started_from[-1] if started_from and started_from[-1] not in ("last", "null") else None
        if global_rank() == 0:
            weights = f" (from {start}, as it did)" if start else ""
            print(f"resume={shown(run_dir)}: no checkpoint there yet, so the run starts again from its beginning"
                  f"{weights}, in its folder, with its settings", file=sys.stderr)  # fmt: skip
        place["ckpt_path"] = start
    placed = [f"{key}={'null' if value is None else _hydra_value(value)}" for key, value in place.items()]
    return [*options, *saved, *placed, *[arg for arg in new if arg not in options and _key(arg) not in mine]]


def _config_search_path(record: Path) -> list[str]:
    """That start's hydra.searchpath=... (a Hydra override, recorded in hydra.yaml, not in
    overrides.yaml): where its config files of the user's own (model=..., data=...) were found."""
    hydra = record.with_name("hydra.yaml")
    if not hydra.is_file():
        return []
    overrides = yaml.safe_load(hydra.read_text())["hydra"]["overrides"]["hydra"] or []
    return [arg for arg in overrides if _key(arg) == "hydra.searchpath"]


def _still_added(arg: str) -> str:
    return arg if arg.startswith(("+", "~")) else f"+{arg}"


def _check_not_elsewhere(run_dir: Path, given: list[str], place: dict[str, str]) -> None:
    """resume= continues a run in its own directory from its newest checkpoint: another run_id,
    output_root or ckpt_path beside it was dropped without a word, and the run went on in place."""
    for arg in given:
        key, _, value = arg.lstrip("+~").partition("=")
        ours = place[key]
        if key == "output_root" and value and Path(value).expanduser().absolute() == Path(ours):
            continue
        if value == ours:
            continue
        raise SetupError(
            f"{arg}: resume={shown(run_dir)} continues that run, in its folder, from its newest checkpoint. "
            f"Fix: leave {key} out; or start a new run from one of its checkpoints: run_id=<new> "
            f"ckpt_path={shown(run_dir / 'checkpoints' / 'last.ckpt')}, with the settings typed again"
        )


def _record_of_newest_checkpoint(run_dir: Path, newest: tuple[Path, int] | None, records: list[Path]) -> Path:
    """The config record of the start that wrote the newest checkpoint, as the checkpoint names it
    (callbacks/start_record.py); for a checkpoint of an older version, the last start that began
    before it was written. Records are in the order of the starts."""
    if newest is None:
        return records[-1]
    from ..callbacks.checkpoints import saved_value
    from ..callbacks.start_record import KEY

    named = run_dir / str(saved_value(newest[0], KEY, "-")) / "overrides.yaml"
    if named in records:
        return named
    written = newest[0].stat().st_mtime
    return ([record for record in records if record.stat().st_mtime <= written] or records[:1])[-1]


DEFAULT_OUTPUT_ROOT = "outputs"  # configs/train.yaml's output_root


def _in(output_root: Path) -> str:
    """`<run_id>` in output_root, as the user would type it."""
    return "<run_id>" if shown(output_root) == "." else f"{shown(output_root)}/<run_id>"


def _listed(names: list[str]) -> str:
    """Run ids as typed in a shell: a name with a space quoted."""
    return ", ".join(shlex.quote(name) for name in names)


def _runs_with_checkpoints(output_root: Path) -> list[str]:
    """The names of the runs in output_root that hold checkpoints, the last 10 by name."""
    from ..callbacks.checkpoints import run_checkpoints

    return sorted(p.name for p in output_root.glob("*") if p.is_dir() and run_checkpoints(p))[-10:]


def this_start_subdir() -> str | None:
    """Where Hydra records this start's config (hydra.output_subdir); None outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().output_subdir if HydraConfig.initialized() else None


def note_new_parents(folder: str | os.PathLike) -> None:
    """Before Hydra makes the run's folder: which folders above it (output_root=new/runs) it makes
    too, so that a start refused later removes them with the run's folder."""
    path = Path(os.path.abspath(folder))  # new/../x is x: noted as new only if x is
    while not path.exists() and path != path.parent:
        _made_parents.add(path)
        path = path.parent


def _remove_made_parents(folder: Path) -> None:
    for parent in Path(os.path.abspath(folder)).parents:
        if parent not in _made_parents:
            return
        try:
            parent.rmdir()  # only an empty folder
        except OSError:  # it holds something (another start's run), or another start removed it meanwhile
            return


def discard_refused_start(run_dir: str | os.PathLike) -> None:
    """For a start refused once the run directory exists (train.py, on a SetupError); in a sweep
    whose first point it is, the sweep's folder too (Hydra wrote multirun.yaml there already)."""
    _discard_this_start(Path(run_dir), this_start_subdir())
    sweep = _sweep_folder()
    if global_rank() == 0 and sweep is not None:
        discard_sweep_folder(sweep)


def discard_sweep_folder(sweep: Path, before_points: tuple[str, ...] = ("multirun.yaml",)) -> None:
    """A sweep's folder that holds only what is written before its points (`before_points`), removed
    with the folders made for it."""
    if sweep.is_dir() and {path.name for path in sweep.iterdir()} <= set(before_points):
        shutil.rmtree(sweep)
        if not any(sweep.parent.iterdir()):  # <output_root>/multirun, made for it
            sweep.parent.rmdir()
            _remove_made_parents(sweep.parent)


def fresh_sweep_folder(sweep: Path) -> str:
    """The fix for a sweep that would train into another sweep's folder."""
    free = next(f"{sweep}-{n}" for n in range(2, 1000) if not Path(f"{sweep}-{n}").exists())
    return f"give this sweep a folder of its own: hydra.sweep.dir={shown(Path(free))}"


def _sweep_folder() -> Path | None:
    """hydra.sweep.dir in a multirun's point, else None."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or HydraConfig.get().mode.name != "MULTIRUN":
        return None
    return Path(HydraConfig.get().sweep.dir)


def paths_in(run_dir: Path) -> set[Path]:
    return set(run_dir.rglob("*")) if run_dir.is_dir() else set()


def remove_made_since(run_dir: Path, before: set[Path]) -> None:
    """For a start refused after the loggers began (the sanity check's monitored metrics): the
    files they made since `before` (paths_in), the run's checkpoints aside. Nothing had trained."""
    if global_rank() != 0:
        return
    made = sorted(paths_in(run_dir) - before, reverse=True)  # a folder after what it holds
    for path in made:
        if "checkpoints" in path.relative_to(run_dir).parts:
            continue
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink(missing_ok=True)


def _discard_this_start(run_dir: Path, subdir: str | None) -> None:
    """Remove what Hydra wrote for this refused start, and the run directory if it is then empty
    and no other start holds it (one that is about to write its record there)."""
    if global_rank() != 0 or not subdir:
        return
    shutil.rmtree(run_dir / subdir, ignore_errors=True)
    for folder in (run_dir / ".hydra" / "resumes", run_dir / ".hydra", *([run_dir] if hold(run_dir) else [])):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    if not run_dir.exists():
        _remove_made_parents(run_dir)
    release(run_dir)  # the refused start's, if it held it


def checkpoint_to_resume(ckpt_path: str | None, run_dir: Path, subdir: str | None) -> str | None:
    """The checkpoint fit() starts from (None: from scratch), or SetupError for a start that
    would overwrite or roll back a run's work. `subdir`: this start's Hydra output subdir."""
    from ..callbacks.checkpoints import checkpoint_steps, remove_partial_files

    if global_rank() == 0 and not hold(run_dir):
        _discard_this_start(run_dir, subdir)
        raise SetupError(
            f"run directory {shown(run_dir)} is in use: another start of this run is still training in it "
            "(two at once would overwrite each other's checkpoints). Fix: wait for it to end, or stop it and then "
            f"`{resume_command(run_dir)}`; or start a new run with another run_id=..."
        )
    steps = checkpoint_steps(run_dir)
    newest = steps[-1] if steps else None
    readable = newest is not None and newest[1] >= 0  # else only work that cannot be resumed
    resume = resume_command(run_dir)
    if readable and restarted() and _started_from(run_dir, ckpt_path):
        # A run started from a checkpoint file (fine-tuning): its requeue or torchrun restart repeats that
        # ckpt_path, and goes on from the run's own newer work instead (before: refused, the job ended).
        if global_rank() == 0:
            print(f"Restarted: the run goes on from {shown(newest[0])} (step {newest[1]}), its own newest "
                  f"checkpoint, not from ckpt_path={ckpt_path}, which it started from", file=sys.stderr)  # fmt: skip
        ckpt_path = "last"
    problem = None
    if ckpt_path is None and newest and not restarted():
        fresh = "start fresh with another run_id=... (default: a new one per start)"
        if (sweep := _sweep_folder()) is not None:  # a second sweep in one Slurm job: the same slurm-<job>
            fresh = fresh_sweep_folder(sweep)
        problem = (
            f"run directory {shown(run_dir)} already holds checkpoints (newest: {shown(newest[0])}, step {newest[1]}), "
            f"and a new run would overwrite them. Fix: resume it with `{resume}` (or ckpt_path=last), or {fresh}"
        )
    elif ckpt_path == "last" and not newest and not restarted():
        runs = _runs_with_checkpoints(run_dir.parent)  # each as typed in a shell: a name with a space quoted
        listed = _listed(runs) or "none"
        one = f"resume={shlex.quote(shown(run_dir.parent / runs[-1]))} (or another of those)" if runs else "resume=..."
        problem = (
            f"ckpt_path=last, but {shown(run_dir)} holds no checkpoint to resume. Runs with checkpoints in "
            f"{shown(run_dir.parent)}: {listed}. Fix: {one}, or drop ckpt_path=last to start fresh"
        )
    elif ckpt_path in (None, "last") and newest and newest[1] < 0 and newest[0].is_file():  # (None: a requeue)
        # a file only: a sharded checkpoint (a folder) has no step this can read; its strategy reads it
        problem = (
            f"{shown(newest[0])}, the newest checkpoint of {shown(run_dir)}, cannot be read (cut short, or not a "
            "checkpoint), and the run has no other. Fix: copy a good checkpoint of the run into "
            f"{shown(run_dir / 'checkpoints')}, or start a new run from scratch with another run_id=..."
        )
    elif ckpt_path not in (None, "last") and readable and Path(ckpt_path).resolve() != newest[0].resolve():
        problem = (
            f"ckpt_path={ckpt_path} into {shown(run_dir)}, whose newest checkpoint is {shown(newest[0])} "
            f"(step {newest[1]}): its newer work would be overwritten. "
            f"Fix: start a new run from it with another run_id=..., or `{resume}`"
        )
    if problem:
        release(run_dir)
        _discard_this_start(run_dir, subdir)
        raise SetupError(problem)
    if global_rank() == 0:
        remove_partial_files(run_dir)
    if ckpt_path not in (None, "last"):
        return ckpt_path
    if newest and global_rank() == 0:  # one cut short (a full disk, a copy stopped halfway): said, not passed over
        for path in (path for path, step in steps if step < 0 and path.is_file()):
            print(f"{shown(path)} cannot be read (cut short, or not a checkpoint): the run goes on from "
                  f"{shown(newest[0])} (step {newest[1]}), the newest that can be", file=sys.stderr)  # fmt: skip
    return str(newest[0]) if newest else None


def _started_from(run_dir: Path, ckpt_path: str | None) -> bool:
    """The run's first start (.hydra/overrides.yaml) was given this checkpoint file: a restart that
    repeats it. Not a start of another run into this folder (a stale SLURM_RESTART_COUNT)."""
    record = run_dir / ".hydra" / "overrides.yaml"
    if ckpt_path in (None, "last") or not record.is_file():
        return False
    given = [arg.split("=", 1)[1] for arg in yaml.safe_load(record.read_text()) or [] if _key(arg) == "ckpt_path"]
    return bool(given) and Path(_unquoted(given[-1])).expanduser().resolve() == Path(ckpt_path).expanduser().resolve()


def hold(run_dir: Path) -> bool:
    """Lock the run directory until release() (run.py: when training ends) or this process ends,
    also when it is killed. False: another process holds it. Where the file system has no such
    locks (some network file systems), nothing is locked and the start goes on."""
    run_dir = run_dir.absolute()
    if run_dir in _held or not run_dir.is_dir():
        return True
    descriptor = os.open(run_dir, os.O_RDONLY)  # not inherited by the processes this one starts
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(descriptor)
        return error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN)
    _held[run_dir] = descriptor
    return True


def release(run_dir: str | os.PathLike) -> None:
    descriptor = _held.pop(Path(run_dir).absolute(), None)
    if descriptor is not None:
        os.close(descriptor)  # and with it the lock
