"""Check `python train.py <overrides>` before Hydra runs it: compose the same config with
Hydra's compose API and check every value (values.py). A wrong choice, key or value then
stops with one line, before a run directory, a process or a download is made. Torch is not
imported for this (except to open a checkpoint given as ckpt_path).

HYDRA_FULL_ERROR=1 skips it: Hydra and the code then fail with their full tracebacks.
"""

import difflib
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from .added_keys import CLOSED, experiment_problem, key_paths, override_problem, touches_closed
from .environment import global_rank, not_a_number, register_resolvers, stale_rank
from .errors import SetupError
from .run_directory import note_new_parents
from .targets import (
    check_added_arguments,
    check_classes,
    check_image_shape,
    check_model_parts,
    check_optimizer_precision,
)
from .values import check_values, home_sign

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
# groups whose choices add to each other (overlays, lists of callbacks): a list of several may merge
MERGED = ("experiment", "callbacks")
REMOVABLE = ("logger", "experiment")  # the top-level keys that `~key` may leave out (run.py does without)
HIDDEN = ("localslurm",)  # the tests' own Slurm; names starting with _ are bases of the others

# Hydra options after which there is nothing to check: Hydra prints something and exits.
_ONE_MODE = ("run", "multirun", "cfg", "info", "shell_completion")  # Hydra takes one of these at a time
SHELLS = ("bash", "zsh", "fish")  # Hydra's completion scripts
_HYDRA_ONLY = ("help", "hydra_help", "version", "cfg", "info", "shell_completion", "experimental_rerun")


def choices(group: str) -> list[str]:
    """The options of a config group that a user may pick."""
    names = (path.stem for path in (CONFIGS / group).glob("*.yaml"))
    return sorted(name for name in names if not name.startswith("_") and name not in HIDDEN)


def config_groups() -> str:
    """`group: a, b, c` per line, for `--help` (configs/train.yaml's hydra.help.template)."""
    groups = [path.relative_to(CONFIGS).as_posix() for path in CONFIGS.rglob("*") if path.is_dir()]
    return "\n".join(f"{group}: {', '.join(choices(group))}" for group in sorted(groups) if choices(group))


def choice_fix(group: str, name: str, allowed: list[str]) -> str:
    """The fix for a choice that is not one: the closest (cluster=puthi: cluster=puhti; DDP: ddp)."""
    by_case = {choice.lower(): choice for choice in allowed}
    close = difflib.get_close_matches(str(name).lower(), list(by_case), n=1, cutoff=0.6)
    return f"{group}={by_case[close[0]]}" if close else f"{group}=<one of those>"


def one_line(message: str) -> str:
    return " ".join(line.strip() for line in message.strip().splitlines() if line.strip())


def parse_problem(error: Exception) -> str:
    """Hydra's override parse error without its caret line and link: `LexerNoViableAltException: a=é`."""
    return " ".join(str(error).strip().splitlines()[0].split()).split(". See https://")[0]


def key_problem(override: str) -> str | None:
    """An override that does not parse for its key (a value would parse once quoted): what is wrong."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    key = override.partition("=")[0]
    try:
        OverridesParser.create().parse_overrides([f"{key}=x"])
    except OverrideParseException:
        return f"{override}: {key.lstrip('+~')} is not a key that Hydra's overrides can name (such as a.b_c, a.0)"
    return None


def merge_problem(error: Exception, node_at: Callable[[str], Any] | None = None) -> str | None:
    """Hydra's `Error merging override K=V` (no more said) where V's kind does not fit K's: a list
    for a key with keys below it, or a mapping for a list. None for another error. `node_at(K)`:
    the config's node at K, to find which key of a mapping V does not fit (Hydra names K)."""
    merged = re.fullmatch(r"Error merging override (([^=+][^=]*)=.*)", one_line(str(error)))  # +key: already there
    cause = one_line(str(error.__cause__ or ""))
    held = re.search(r"Cannot merge \w+ with \w+.*object_type=(\w+)", cause)
    if merged and not held and (inner := cause_key(error)):  # hydra.run={dir:[1]}: "Cannot convert 'ListConfig' ..."
        return f"{merged[1]}: {inner}: {cause.split(' full_key:')[0]}. Fix: {inner}=<a value of its kind>"
    if not merged or not held:
        return None
    given, key, kind = merged[1], merged[2].lstrip("+~"), "list" if held[1] == "list" else "dict"  # or Hydra's own
    value = _parsed_value(given)
    if isinstance(value, dict) and kind == "dict":  # a mapping for a mapping: a key below does not fit
        found = next(_kinds_that_differ(node_at(key), value, f"{key}."), None) if node_at else None
        if found is None:
            fix = f"set them one at a time, {key}.<key>=<value>"
            return f"{given}: a value of the wrong kind for a key of {key}. Fix: {fix}"
        key, kind = found
    if kind == "dict":
        return f"{given}: {key} holds keys of its own, not a list. Fix: set them one at a time, {key}.<key>=<value>"
    return f"{given}: {key} is a list, not a mapping. Fix: {key}=[<item>,<item>,...]"


def cause_key(error: Exception) -> str | None:
    """The key that Hydra's error is about, from its cause (`full_key: model.net.b`)."""
    found = re.search(r"full_key: (\S+)", one_line(str(error.__cause__ or "")))
    return found[1] if found else None


def _parsed_value(override: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(override).value()
    except Exception:  # Hydra merged it, so it parses; nothing to add if not
        return None


def _kinds_that_differ(node, value: dict, prefix: str):
    """(key, the kind the config holds there) for each key of a given mapping whose value is a
    list where the config has a mapping, or the other way round."""
    from omegaconf import DictConfig, ListConfig

    for name, item in value.items():
        child = node._get_node(name) if isinstance(node, DictConfig) and name in node else None
        if isinstance(item, dict) and isinstance(child, ListConfig):
            yield f"{prefix}{name}", "list"
        elif isinstance(item, list) and isinstance(child, DictConfig):
            yield f"{prefix}{name}", "dict"
        elif isinstance(item, dict) and isinstance(child, DictConfig):
            yield from _kinds_that_differ(child, item, f"{prefix}{name}.")


def stop(message: str, code: int = 2) -> NoReturn:
    """Print the error once (rank 0; every rank of srun/torchrun checks the same), exit 2 (a wrong
    input; `code` for what went wrong later)."""
    if global_rank() == 0:
        print(f"ERROR: {one_line(message)}", file=sys.stderr)
    else:  # a launcher that sees another rank end first stops the rest, rank 0 too, before it said why
        time.sleep(2)
    sys.exit(code)


def check_launch_variables() -> None:
    """Exit 2 with one line if a rank or size variable is stale or not a number. Said by this process
    whatever its rank (no other process would say it), before anything reads the rank."""
    if wrong := stale_rank() or not_a_number():
        print(f"ERROR: {wrong}", file=sys.stderr)
        sys.exit(2)


def check_command_line(argv: list[str]) -> None:
    """Exit 2 with one line if the overrides in argv are wrong; return if they are fine."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        return
    check_launch_variables()
    try:
        check_arguments(argv)
    except SetupError as error:
        stop(str(error))


def check_arguments(argv: list[str]) -> None:
    """Raise SetupError (one line) if train.py's arguments (overrides, -m) are wrong."""
    from hydra._internal.utils import get_args_parser

    args, unread = get_args_parser().parse_known_args(argv)
    if unread:  # Hydra would print its usage and "unrecognized arguments"
        first = unread[0]
        if first.startswith("-"):
            raise SetupError(f"{first}: not an option of train.py. Fix: `python train.py --help` lists them")
        option = [arg for arg in argv[: argv.index(first)] if arg.startswith("-")][-1]
        options = [arg for arg in argv if arg not in args.overrides and arg not in unread]
        raise SetupError(
            f"{first}: an override after an option ({option}), which Hydra does not read. Fix: the options "
            f"first, then all overrides: python train.py {shlex.join([*options, *args.overrides, *unread])}"
        )
    modes = [f"--{name.replace('_', '-')}" for name in _ONE_MODE if getattr(args, name, None)]
    if len(modes) > 1:  # Hydra's ValueError, with a traceback
        raise SetupError(f"{' with '.join(modes)}: Hydra does one of these at a time. Fix: leave out all but one")
    if args.shell_completion:
        check_shell_completion(args.overrides)
    if args.experimental_rerun is not None:  # needs a pickle that no run here writes: a traceback
        raise SetupError(
            f"--experimental-rerun {args.experimental_rerun}: Hydra's rerun needs a config.pickle, which runs of this "
            "project do not write. Fix: python train.py resume=outputs/<run_id> (the run's config, from its newest "
            "checkpoint), or its overrides again from outputs/<run_id>/.hydra/overrides.yaml"
        )
    if other_configs := _other_configs(args):
        raise SetupError(other_configs)
    if args.cfg:  # prints the config: it must compose
        register_resolvers()
        _compose(_jobs(args.overrides, multirun=False)[0])  # a wrong choice or key: one line (values as given)
        return
    if any(getattr(args, name, None) for name in _HYDRA_ONLY):
        return
    _check_keys_nothing_reads(args.overrides)
    check_overrides(args.overrides, args.multirun)


def _other_configs(args) -> str | None:
    """--config-name, --config-path, --config-dir: a root config or config folder other than configs/train.yaml.
    The checks here and resume= read only train.yaml, and resume= finds no config folder given this way: such a
    run went unchecked (a wrong value met a traceback, after its folder was made), and its resume took
    train.yaml's settings. What is wrong with it, or None."""
    if args.config_name and args.config_name.removesuffix(".yaml") != "train":
        name = Path(args.config_name).stem
        return (
            f"--config-name {args.config_name}: train.py runs configs/train.yaml; its checks and resume= read that "
            f"one only (another would run unchecked, and resume with train.yaml's settings). Fix: your settings as an "
            f"experiment: configs/experiment/{name}.yaml, its first line `# @package _global_` (as in "
            f"experiment/smoke.yaml), then python train.py experiment={name}"
        )
    # Hydra reads a relative --config-path from train.py's folder, a relative --config-dir from the working one
    folders = (("--config-path", args.config_path, CONFIGS.parent), ("--config-dir", args.config_dir, Path.cwd()))
    for option, folder, base in folders:
        if folder and (found := (base / Path(folder).expanduser()).resolve()) != CONFIGS:
            return _config_folder(option, folder, found)
    return None


def _config_folder(option: str, folder: str, found: Path) -> str:
    return (
        f"{option} {folder}: a config folder that resume= would not find again (and train.py's checks read "
        f"configs/ only). Fix: keep train.yaml in configs/; for config files of your own elsewhere, "
        f"'hydra.searchpath=[file://{found}]' (kept with the run and checked)"
    )


def _check_keys_nothing_reads(overrides: list[str]) -> None:
    """`+max_epochs=5`, `+resume=DIR`: a key added at the top of the config that nothing reads, where
    the config has it below (trainer.max_epochs) or train.py reads it without + (resume=): Hydra
    added it, and the run trained as if it were not there. hydra.output_subdir: where the run's
    config is kept, which resume= and a requeue read (elsewhere, or null, the run did not resume)."""
    # Lightning starts the other ranks of one node with the command again, plus hydra.output_subdir=null
    # (one .hydra, rank 0's) and hydra.job.name=train_ddp_process_<rank>: those are its own.
    lightnings_rank = any(override.startswith("hydra.job.name=train_ddp_process_") for override in overrides)
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key == "hydra.output_subdir" and not lightnings_rank:
            raise SetupError(
                f"{override}: a run keeps its config in .hydra (a resume in .hydra/resumes/<time>), where resume= and "
                "a requeue read it. Fix: leave out hydra.output_subdir"
            )
        if key == "output_dir" and override.startswith(("output_dir=", "++output_dir=")):
            raise SetupError(_own_output_dir(value))
        if not override.startswith("+") or "." in key or not value:
            continue
        if key == "resume":
            raise SetupError(f"{override}: resume= takes no +; with it a new run started. Fix: resume={value}")
        reference = "${" + key + "}"  # +name=exp1 'run_id=${name}': read there
        if any(reference in other for other in overrides):
            continue
        keys, _ = _config_keys([chosen for chosen in overrides if _chooses_group(chosen)])
        below = [] if key in keys else [name for name in keys if name.endswith(f".{key}")]  # there: Hydra says so
        if len(below) == 1:  # +name: cluster.name, strategy.name, ... is no one key meant
            raise SetupError(
                f"{override}: nothing reads {key} at the top of the config; {below[0]} is where it is read. "
                f"Fix: {below[0]}={value} (a key of your own: read it as {reference}, or add it to configs/train.yaml)"
            )


def _own_output_dir(value: str) -> str:
    """output_dir=...: the run's checkpoints and logs went there, its .hydra record (which resume= reads) to
    output_root/run_id: a run that no resume found."""
    folder = Path(value).expanduser()
    fix = f"output_root={shlex.quote(str(folder.parent))} run_id={shlex.quote(folder.name)}" if folder.name else ""
    return (
        f"output_dir={value}: the run's folder is output_root/run_id, where Hydra keeps its record (.hydra) that "
        f"resume= reads; set apart, its checkpoints would part from it. Fix: {fix or 'output_root=... run_id=...'}"
    )


def check_shell_completion(overrides: list[str]) -> None:
    """What Hydra's --shell-completion meets with a traceback: no action, a shell it has no script
    for (ValueError), or query= typed by hand (KeyError: the shell's completion sets COMP_LINE)."""
    fix = 'Fix: eval "$(python train.py -sc install=bash)", then Tab completes what you type after python train.py'
    actions = [arg for arg in overrides if arg.split("=")[0] in ("install", "uninstall", "query")]
    if len(actions) != 1:
        raise SetupError(f"--shell-completion: needs what to do: install=bash (or zsh, fish), or uninstall=bash. {fix}")
    action, _, shell = actions[0].partition("=")
    if shell not in SHELLS:
        raise SetupError(f"--shell-completion {actions[0]}: Hydra completes in {', '.join(SHELLS)}. Fix: {action}=bash")
    if action == "query" and "COMP_LINE" not in os.environ:
        raise SetupError(
            f"--shell-completion {actions[0]}: the shell's completion asks this as you press Tab (it sets COMP_LINE); "
            f"typed by hand there is nothing to complete. {fix}"
        )


def check_overrides(overrides: list[str], multirun: bool = False) -> None:
    """Raise SetupError (one line) if a job these overrides make has a wrong choice, key or value."""
    from omegaconf import OmegaConf

    register_resolvers()  # the configs' ${default_run_id:} etc. (train.py registers them anyway)
    if "hydra/launcher=submitit_slurm" in overrides:  # the plugin's own config, which Hydra lists too
        raise SetupError(
            "hydra/launcher=submitit_slurm: the submitit plugin's own settings ask Slurm for none of the cluster "
            "profile's (GPUs, account, time, memory, the requeue before the time limit). Fix: hydra/launcher=slurm"
        )
    on_slurm = "hydra/launcher=slurm" in overrides
    if on_slurm:  # where sbatch is, with -m
        from ..slurm.sweep import check_launcher_overrides, check_slurm_jobs, check_slurm_sweep

        check_slurm_sweep(multirun)
    jobs = _jobs(overrides, multirun)  # each override parses
    if on_slurm:  # before composing: hydra.launcher.additional_parameters.qos=... is no key there
        check_launcher_overrides(overrides)
    points = [_checked(job) for job in jobs]
    folder = points and OmegaConf.select(
        points[0], f"hydra.{'sweep' if multirun else 'run'}.dir", throw_on_resolution_failure=False
    )  # None where it reads Hydra's runtime values (${hydra:job.name}), which exist only once Hydra runs
    if folder:  # the folders Hydra will make: a start refused later removes them again
        note_new_parents(folder)
    if multirun and points:  # none where the basic sweeper's split cannot expand them (model=glob(*)): Hydra does
        check_sweep_folders(jobs, points[0])
    if on_slurm:  # each point's job, as Slurm will judge it (else a traceback at submission)
        check_slurm_jobs(points, overrides)


def check_sweep_folders(jobs: list[list[str]], first) -> None:
    """hydra.sweep.dir a file (FileExistsError's traceback), or one hydra.sweep.subdir for every point: the
    second point was refused as a new run in the first one's folder, and Hydra ended in a traceback.
    And run_id, which a sweep does not use."""
    from omegaconf import OmegaConf

    from .paths import unwritable

    sweep_dir = OmegaConf.select(first, "hydra.sweep.dir", default=None)
    reason = isinstance(sweep_dir, str) and unwritable(Path(sweep_dir), folder=True)
    if reason:
        raise SetupError(f"hydra.sweep.dir={sweep_dir}: {reason}. Fix: a folder you can write, or leave it out")
    named = next((arg for job in jobs for arg in job if arg.lstrip("+").startswith("run_id=")), None)
    if named:  # dropped without a word: Hydra puts each point in hydra.sweep.dir/hydra.sweep.subdir
        raise SetupError(
            f"{named} with -m: a sweep's points run in its folder, one subfolder each, not under a run_id. Fix: leave "
            "run_id out; to name the sweep's folder, hydra.sweep.dir=<folder>"
        )
    key = "hydra.sweep.subdir="
    given = {next((arg.split("=", 1)[1] for arg in job if arg.lstrip("+").startswith(key)), None) for job in jobs}
    if len(jobs) > 1 and len(given) == 1 and (subdir := given.pop()) is not None and "$" not in subdir:  # ${seed}
        raise SetupError(
            f"hydra.sweep.subdir={subdir}: the same folder for all {len(jobs)} points of the sweep, and a folder holds "
            "one run. Fix: leave it out (a folder a point, by its number), or name the point in it, e.g. "
            "'hydra.sweep.subdir=seed_${seed}'"
        )


def checked_config(overrides: list[str]):
    """train.py's config with these overrides, checked as train.py checks it (SetupError: one
    line), without Hydra's own settings: for the benchmarks, which take train.py's overrides."""
    from omegaconf import open_dict

    register_resolvers()  # the configs' ${default_run_id:} etc., as train.py registers them
    (job,) = _jobs(overrides, multirun=False)  # each override parses
    cfg = _checked(job)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def _checked(overrides: list[str]):
    cfg = _compose(overrides)
    _check_choices(cfg)
    _check_experiment_package(cfg)
    _check_added_keys(cfg, overrides)
    _check_working_folder(cfg)
    check_values(cfg)
    check_added_arguments(cfg, overrides)
    check_model_parts(cfg)
    check_classes(cfg)
    check_image_shape(cfg)
    check_optimizer_precision(cfg, overrides)
    return cfg


def _jobs(overrides: list[str], multirun: bool) -> list[list[str]]:
    """The override lists of the jobs to run: one, or with -m every point of the sweep."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException, OverrideParseException

    parser = OverridesParser.create()
    parsed = []
    for override in overrides:
        try:
            parsed += parser.parse_overrides([override])
        except OverrideParseException as error:
            reason = parse_problem(error)
            key, _, value = override.partition("=")
            if wrong := key_problem(override):
                raise SetupError(f"{wrong}. Fix: a name of letters, digits and _ that begins with a letter") from None
            if value.startswith("~"):  # quoted, as the fix below says, it became a folder named ~ in the project
                raise SetupError(home_sign(key, value)) from None
            quoted = f"'{key}=\"{value}\"'" if value and '"' not in value else "'key=\"a b\"'"
            raise SetupError(
                f"{override}: not a valid override ({reason}). Fix: key=value, e.g. data.batch_size=64; "
                f"quote a value with spaces or special characters (=, ...), for the shell as well: {quoted}"
            ) from error
        _check_group_value(parsed[-1], override)
    if not multirun:
        return [overrides]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    try:
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except HydraException:  # a sweep that another sweeper plugin understands: it checks it
        chosen = [override for override in overrides if _chooses_group(override)]
        basic = not any(override.key_or_group == "hydra/sweeper" for override in parsed) and (
            _chosen_config(chosen).hydra.runtime.choices.get("hydra/sweeper") == "basic"  # else an experiment's
        )
        for override in parsed:
            if basic and override.is_interval_sweep():  # else Hydra's traceback once the sweep starts
                key = override.get_key_element()
                raise SetupError(
                    f"{override.input_line}: interval() is for sweepers that draw values (e.g. Optuna's, "
                    f"hydra/sweeper=optuna); Hydra's basic sweeper runs the values it is given. Fix: list them, "
                    f"e.g. {key}=0.1,0.15,0.2, or {key}=range(1,4)"
                ) from None
        return []


def _check_group_value(parsed, given: str) -> None:
    """`logger=null`: a config group takes the name of one of its choices; leaving it out is `~logger`.
    `~data`: a top-level key that train.py needs cannot be left out (a traceback in the run)."""
    group = parsed.key_or_group
    if parsed.is_delete() and group not in REMOVABLE and (group in _root_keys() or choices(group)):
        allowed = choices(group)
        change = f"{group}=<one of: {', '.join(allowed)}>" if allowed else f"{group}=<another value>"
        raise SetupError(f"{given}: train.py needs {group}; it cannot be left out. Fix: drop {given}, or {change}")
    if group.startswith("hydra/"):
        return
    value = None if parsed.is_delete() else parsed.value()
    several = isinstance(value, list) and len(value) > 1 and group not in MERGED
    if several and (allowed := choices(group)):
        first = str(value[0])
        raise SetupError(
            f"{given}: {group} takes one of its choices ({', '.join(allowed)}); a list of them merges them into one "
            f"config (Hydra's multi-select), which is none of them. Fix: "
            f"{f'{group}={first}' if first in allowed else choice_fix(group, first, allowed)}"
        )
    if parsed.is_delete() or value is not None:
        return
    allowed = choices(group)
    if allowed:
        leave_out = f", or ~{group} to leave it out" if group in REMOVABLE else ""
        raise SetupError(
            f"{given}: {group} is a config group and takes one of its choices: {', '.join(allowed)}. "
            f"Fix: e.g. {group}={allowed[0]}{leave_out}"
        )


def _root_keys() -> list[str]:
    """The keys that configs/train.yaml sets itself (seed, ckpt_path, ...)."""
    import yaml

    return [key for key in yaml.safe_load((CONFIGS / "train.yaml").read_text()) if key not in ("defaults", "hydra")]


def _check_added_keys(cfg, overrides: list[str]) -> None:
    """A key set under a node the project reads key by key (launch/added_keys.py), by an override
    that Hydra took (+, ++) or by an experiment file: the config without it says which keys that
    node has. (A plain override of a key that is not there Hydra refuses: _no_such_key.)"""
    taken = [override for override in overrides if override.startswith("+") or "={" in override.replace(" ", "")]
    forced = [override for override in taken if touches_closed(override)]  # a mapping too: cluster=local's slurm
    if forced:
        base = _compose([override for override in overrides if override not in forced and not _drops(override, forced)])
        for override in forced:
            if problem := override_problem(override, base, _started_with(override), final=cfg):
                raise SetupError(problem)
    names = _experiments(cfg, overrides)
    setting = [name for name in names if _may_set_closed_keys(name)]  # each file read once
    if setting:  # its choices of the groups, without the file itself
        chosen = [(group, choice) for group, choice in cfg.hydra.runtime.choices.items() if isinstance(choice, str)]
        same = [f"{group}={choice}" for group, choice in chosen if group != "experiment" and (CONFIGS / group).is_dir()]
        base = _compose([*search_paths(overrides), *same])
        files = " or ".join(_experiment_file(name) for name in setting)
        typed = names[0] if len(names) == 1 else f"[{','.join(names)}]"
        if problem := experiment_problem(cfg, base, f"experiment={typed}: {files}"):
            raise SetupError(problem)


def _drops(override: str, forced: list[str]) -> bool:
    """~key of a key that only one of `forced` sets (the config without them has none to drop)."""
    dropped = tuple(override[1:].split("=")[0].split(".")) if override.startswith("~") else None
    return bool(dropped) and any(dropped in key_paths(other) for other in forced)


def _experiments(cfg, overrides: list[str]) -> list[str]:
    """The experiment chosen, or each of a list (experiment=[smoke,mine]), which Hydra's choices omit."""
    name = cfg.hydra.runtime.choices.get("experiment")
    if isinstance(name, str):
        return [name]
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = [override for override in overrides if override.partition("=")[0].lstrip("+") == "experiment"]
    value = OverridesParser.create().parse_override(given[-1]).value() if given else None
    return [str(name) for name in value] if isinstance(value, list) else []


def search_paths(overrides: list[str]) -> list[str]:
    """hydra.searchpath=[...]: where the user's own config files are, for a composition of the same choices."""
    return [override for override in overrides if override.lstrip("+").startswith("hydra.searchpath")]


def _started_with(override: str) -> str:
    """The folder of the run that resume= continues, where that run's start gave this override."""
    from .run_directory import RESUMED

    return next((folder for folder, saved in RESUMED.items() if override in saved), "")


def compose_train(overrides: list[str]):
    """train.py's config with these overrides, Hydra's settings included, unchecked (SetupError where
    Hydra refuses one: one line)."""
    register_resolvers()
    return _compose(overrides)


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException, MissingConfigException

    try:
        with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3", job_name="train"):
            return compose("train", overrides=overrides, return_hydra_config=True)
    except MissingConfigException as error:
        raise SetupError(_unknown_choice(error, overrides)) from error
    except ConfigCompositionException as error:
        raise SetupError(_bad_key(error, overrides)) from error
    except Exception as error:  # anything else Hydra refuses: its own words, on one line
        raise SetupError(
            f"{' '.join(overrides)}: {one_line(str(error))}. Fix: correct the override it names "
            "(HYDRA_FULL_ERROR=1 shows Hydra's full report)"
        ) from error


def _check_choices(cfg) -> None:
    """A base (cluster=_base) composes, but is only a part of the others."""
    for group, name in cfg.hydra.runtime.choices.items():
        if isinstance(name, str) and name.startswith("_") and (CONFIGS / group).is_dir():
            allowed = choices(group)
            raise SetupError(
                f"{group}={name}: a base of the other {group} choices, not one itself; allowed: "
                f"{', '.join(allowed)}. Fix: {choice_fix(group, name.lstrip('_'), allowed)}"
            )


def _check_working_folder(cfg) -> None:
    """hydra.job.chdir (=true, 1, yes; or in an experiment file): the run worked in its own folder, where the
    project's relative paths named other folders ("MNIST is not under data/MNIST/raw", or a download into each)."""
    if cfg.hydra.job.get("chdir") is True:
        raise SetupError(
            "hydra.job.chdir=true: the run would work in its own folder, where the project's relative paths "
            "(data.root=data, output_root=outputs) name other folders (MNIST not found there). Fix: leave it "
            "out; the run's folder is output_dir in the config"
        )


def _check_experiment_package(cfg) -> None:
    """An experiment file without its first line `# @package _global_` lands under `experiment:`, which
    nothing reads: the run trained with none of its settings, without a word."""
    name = cfg.hydra.runtime.choices.get("experiment")
    if name and "experiment" in cfg:
        raise SetupError(
            f"experiment={name}: {_experiment_file(name)} lacks its first line `# @package _global_`, so its "
            f"settings would land under experiment.*, which nothing reads. Fix: make `# @package _global_` its first "
            "line (as in configs/experiment/smoke.yaml)"
        )


def _may_set_closed_keys(experiment: str) -> bool:
    """False where the experiment's file is here and sets nothing under the closed nodes: no second
    composition for every run with experiment=smoke."""
    import yaml

    path = CONFIGS / "experiment" / f"{experiment}.yaml"
    if not path.is_file():  # in hydra.searchpath
        return True
    settings = yaml.safe_load(path.read_text())
    return not isinstance(settings, dict) or any(parent.split(".")[0] in settings for parent in CLOSED)


def _experiment_file(name: str) -> str:
    here = (CONFIGS / "experiment" / f"{name}.yaml").is_file()
    return f"configs/experiment/{name}.yaml" if here else f"experiment/{name}.yaml (in hydra.searchpath)"


def _given(key: str, overrides: list[str]) -> str:
    """The override as the user typed it, found by its key."""
    for override in overrides:
        if override.lstrip("+~").split("=", 1)[0] == key:
            return override
    return key


def _unknown_choice(error, overrides: list[str]) -> str:
    group, _, name = (error.missing_cfg_file or "").rpartition("/")
    # Hydra's list covers every search path (hydra/launcher: its plugins' and ours); bases and test-only out.
    allowed = sorted(option for option in error.options or [] if not option.startswith("_") and option not in HIDDEN)
    if group and allowed:
        listed = ", ".join(allowed)
        return f"{group}={name}: no such choice of {group}; allowed: {listed}. Fix: {choice_fix(group, name, allowed)}"
    if not group or not (CONFIGS / group).is_dir():
        groups = sorted(path.name for path in CONFIGS.iterdir() if path.is_dir() and choices(path.name))
        return (
            f"{_given(group or name, overrides)}: no config group {group or name!r}; the groups are "
            f"{', '.join(groups)}. Fix: one of them (python train.py --help lists their choices)"
        )
    return f"{group}={name}: no such choice of {group}. Fix: `python train.py --help` lists the choices"


def _bad_key(error, overrides: list[str]) -> str:
    from omegaconf import OmegaConf

    chosen = [override for override in overrides if _chooses_group(override)]
    if problem := merge_problem(error, lambda key: OmegaConf.select(_chosen_config(chosen), key)):
        return problem
    message = one_line(str(error))
    match = re.search(r"'([^']+)'|Multiple values for (\S+)\.", message)
    key = next((group for group in match.groups() if group), "") if match else ""
    merging = re.fullmatch(r"Error merging override (\+[^+]\S*)", message)
    if not key and merging:  # +key of a key whose value refers to Hydra's (${output_dir}): no more said
        given = merging[1]
        return f"{given}: {given[1:].split('=')[0]} is already in the config. Fix: {given[1:]} (without +)"
    given = _given(key, overrides)
    if "already at" in message or "Multiple values for" in message:
        return f"{given}: {key} is already in the config. Fix: {given.lstrip('+')} (without +)"
    if "does not exist" in message or "Could not override" in message:
        return _no_such_key(error, key, given, overrides)
    if "Ambiguous value for argument" in message:  # a,b without -m
        key, _, value = given.lstrip("+~").partition("=")
        return (
            f"{given}: a comma lists values to sweep over (with -m) or the items of a list. Fix: {key}='{value}' "
            f"(quoted) for text with a comma, {key}=[{value}] for a list, or -m to sweep"
        )
    return f"{given}: {message}"


def _no_such_key(error, key: str, given: str, overrides: list[str]) -> str:
    """Judged against the config that the user's choices make: `data.val_size=...` with data=synthetic
    (also chosen through experiment=smoke) names data=mnist, which has it, not the key itself.
    `model.net={b:1}`: Hydra could not override model.net, which is there; the key missing is
    model.net.b (its cause says)."""
    found = cause_key(error)
    missing = found if found and found.startswith(f"{key}.") else key
    chosen = [override for override in overrides if _chooses_group(override)]
    keys, picked = _config_keys(chosen)
    command = f"python train.py {' '.join([*chosen, '--cfg job'])}"
    group, _, rest = missing.partition(".")
    having = [name for name in choices(group) if name != picked.get(group) and rest in _group_keys(group, name)]
    if rest and picked.get(group) and having:
        return (
            f"{given}: {group}={picked[group]} has no key {rest} ({group}={having[0]} has). "
            f"Fix: {group}={having[0]}, or a key of {group}={picked[group]} (`{command}` lists them)"
        )
    if touches_closed(given):  # the key is under a node that reads its own keys only: a + would not help
        base = _compose([*search_paths(overrides), *chosen])
        if problem := override_problem(given, base, _started_with(given)):
            return problem
    if missing != key:
        mapping, _, name = missing.rpartition(".")
        has = [other.removeprefix(f"{mapping}.") for other in keys if other.rpartition(".")[0] == mapping]
        return (
            f"{given}: {mapping} has no key {name} (it has {', '.join(has) or 'none'}). "
            f"Fix: set one of its keys, {mapping}.<key>=<value>, or add one with +{missing}=<value>"
        )
    close = difflib.get_close_matches(key, [other for other in keys if other != key], n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"{given}: no such key in the config. Fix: {hint}`{command}` lists the keys; +{key}=... adds one"


def _chooses_group(override: str) -> bool:
    name, _, value = override.lstrip("+").partition("=")
    # data={a: 1} sets keys of the chosen data config; it chooses none
    return "=" in override and not override.startswith("~") and (CONFIGS / name).is_dir() and value[:1] not in "{["


def _config_keys(chosen: list[str]) -> tuple[list[str], dict]:
    """Every dotted key of the config with these group choices (else the default's), and the
    choice of each group."""
    cfg = _chosen_config(chosen)
    keys = [key for key in _keys(cfg, "") if key.split(".", 1)[0] != "hydra"]
    return keys, dict(cfg.hydra.runtime.choices)


def _chosen_config(chosen: list[str]):
    """The config with these group choices, else the default's."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3", job_name="train"):
        try:
            return compose("train", overrides=chosen, return_hydra_config=True)
        except Exception:  # a choice that is itself wrong: the default config's keys still help
            return compose("train", return_hydra_config=True)


def _group_keys(group: str, name: str) -> list[str]:
    """The dotted keys that one choice file of a group sets (not its defaults' keys)."""
    from omegaconf import DictConfig, OmegaConf

    node = OmegaConf.load(CONFIGS / group / f"{name}.yaml")
    return list(_keys(node, "")) if isinstance(node, DictConfig) else []


def _keys(node, prefix: str):
    from omegaconf import DictConfig

    for name in node.keys():
        child = node._get_node(name)  # unresolved: interpolations stay as they are
        yield f"{prefix}{name}"
        if isinstance(child, DictConfig):
            yield from _keys(child, f"{prefix}{name}.")
