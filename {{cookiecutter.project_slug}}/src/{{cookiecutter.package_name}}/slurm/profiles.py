"""Read the cluster and strategy configs for the sbatch renderer through Hydra's compose API:
the same files, defaults lists and ${...} interpolations that train.py composes."""

import fnmatch
import functools
import os
import shlex
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..launch.added_keys import override_problem, touches_closed, unknown_key

PROJECT = Path(__file__).resolve().parents[3]
CONFIGS = PROJECT / "configs"


class ProfileError(ValueError):
    """A profile or override that does not exist; the message lists what does."""


def choices(group: str, configs: Path = CONFIGS) -> list[str]:
    return sorted(path.stem for path in (configs / group).glob("*.yaml") if not path.stem.startswith("_"))


@contextmanager
def hydra_for(configs: Path):
    """Hydra reading `configs`, also inside a running Hydra app (train.py, a sweep): restored after."""
    outer = GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(configs.resolve()), version_base="1.3"):
            yield
    finally:
        GlobalHydra.instance().clear()
        GlobalHydra.instance().hydra = outer


def load(group: str, name: str, configs: Path = CONFIGS, overrides: list[str] = (), resolve: bool = True) -> dict:
    """configs/<group>/<name>.yaml as Hydra composes it, with `KEY=VALUE` overrides of its keys
    (`+KEY=VALUE` adds a key, `~KEY` removes one), as plain data."""
    if name not in choices(group, configs):
        from ..launch.command_line import HIDDEN, choice_fix  # HIDDEN: the tests' own profile, not offered

        offered = [choice for choice in choices(group, configs) if choice not in HIDDEN]
        fix = choice_fix(group, name, offered)
        raise ProfileError(f"{group}={name} does not exist; choose one of: {', '.join(offered)}. Fix: {fix}")
    for override in overrides:
        check_parses(group, override)
    config = None
    try:
        config = composed(configs, (f"+{group}={name}",), files(configs, group))[group]
        for override in overrides:
            check_key(group, config, override)
        if overrides:
            more = (f"+{group}={name}", *(prefixed(group, o) for o in overrides))
            config = composed(configs, more, files(configs, group))[group]
        return OmegaConf.to_container(config, resolve=resolve)  # ${oc.env:...} etc. read now, not cached
    except (HydraException, OmegaConfBaseException) as error:  # Hydra's own message spans lines
        from ..launch.command_line import cause_key, merge_problem
        from ..launch.run_directory import _key

        node_at = None if config is None else lambda key: OmegaConf.select(config, key.removeprefix(f"{group}."))
        if problem := merge_problem(error, node_at):
            raise ProfileError(problem) from None
        missing = cause_key(error)
        if missing and config is not None and "Could not override" in str(error):  # K={a: 1}: K.a is not there
            given = [prefixed(group, o) for o in overrides if missing.startswith(f"{group}.{_key(o)}.")]
            check_key(group, config, f"{missing.removeprefix(f'{group}.')}=", given=" ".join(given))
        problem = " ".join(str(error).split("\n")[0].split())
        hint = " (quote a value with special characters: KEY='...')" if "input" in problem else ""
        raise ProfileError(f"{group}={name} {' '.join(overrides)}: {problem}{hint}") from None


@functools.lru_cache(maxsize=128)
def composed(configs: Path, overrides: tuple[str, ...], files: tuple) -> DictConfig:
    """Hydra's composition (it takes a while), once per process for the same files and overrides."""
    with hydra_for(configs):
        return compose(overrides=list(overrides))


def files(configs: Path, group: str) -> tuple:
    """The group's files and their change times: an edited profile is composed again."""
    return tuple((path.name, path.stat().st_mtime_ns) for path in sorted((configs / group).glob("*.yaml")))


def check_parses(group: str, override: str) -> None:
    """KEY=VALUE must be one value in Hydra's override syntax: unquoted, a value with characters
    outside it (é, a space) is a lexer error, and a,b a sweep, which a profile cannot take."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from ..launch.command_line import key_problem, parse_problem

    given = prefixed(group, override)
    try:
        (parsed,) = OverridesParser.create().parse_overrides([given])
        problem = "several values (a sweep)" if parsed.is_sweep_override() else None
    except OverrideParseException as error:
        problem = f"not a valid override ({parse_problem(error)})"
    key, _, value = given.partition("=")
    if problem and (wrong := key_problem(given)):  # the key, not the value: quoting would not help
        raise ProfileError(f"{wrong}. Fix: another name; an environment variable's starts with a letter or _")
    if problem:
        quoted = shlex.quote(f'{key}="{value}"') if '"' not in value else shlex.quote(f"{key}='{value}'")
        raise ProfileError(f"{given}: {problem}. Fix: quote the value, {quoted}")


def check_key(group: str, config, override: str, given: str = "") -> None:
    """KEY=VALUE must name a key of the profile: a typo would otherwise be ignored. `given`: the
    override that named it, where that is another (KEY={a: 1} names KEY.a)."""
    key = override.split("=")[0]
    full, whole = prefixed(group, override), OmegaConf.create({group: config})
    if not given and touches_closed(full) and (problem := override_problem(full, whole)):
        raise ProfileError(problem)
    if key.startswith(("+", "~")) or OmegaConf.select(config, key, default=KeyError) is not KeyError:
        return
    parent = OmegaConf.select(config, key.rpartition(".")[0]) if "." in key else config
    known = ", ".join(parent) if OmegaConf.is_dict(parent) else "none"
    said = f"{given}: " if given else ""
    adds = "" if unknown_key(tuple(f"{group}.{key}".split(".")), whole) else f" (+{group}.{key}=... adds it)"
    raise ProfileError(f"{said}{group}.{key}: no such key; known here: {known}{adds}")


def override_sign(override: str) -> str:
    """Hydra's +, ++ or ~ before an override's key ("" for none)."""
    return override[: len(override) - len(override.lstrip("+~"))]


def prefixed(group: str, override: str) -> str:
    sign = override_sign(override)
    return f"{sign}{group}.{override.removeprefix(sign)}"


def detect_cluster(
    env=os.environ, hostnames: list[str] | None = None, configs: Path = CONFIGS
) -> tuple[str, str] | None:
    """The profile whose `detect:` matches SLURM_CLUSTER_NAME, else the host name: (name, why)."""
    if hostnames is None:
        hostnames = [socket.gethostname()]  # not getfqdn(): a DNS lookup can stall every start
    # Each file's own `detect:`, not composed: train.py runs this at every start (a composition
    # of every profile costs seconds on a busy node), and a profile built on another (defaults:
    # [puhti]) must not claim that cluster's hosts too.
    profiles = {}
    for name in choices("cluster", configs):
        detect = OmegaConf.load(configs / "cluster" / f"{name}.yaml").get("detect") or {}
        profiles[name] = OmegaConf.to_container(OmegaConf.create(detect), resolve=True)
    slurm_name = env.get("SLURM_CLUSTER_NAME")
    for name, detect in profiles.items():
        if slurm_name and slurm_name in (detect.get("cluster_names") or []):
            return name, f"SLURM_CLUSTER_NAME={slurm_name}"
    for name, detect in profiles.items():
        for pattern in detect.get("hostnames") or []:
            for host in hostnames:
                if fnmatch.fnmatch(host, pattern):
                    return name, f"host name {host}"
    return None


def add_detected_cluster(overrides: list[str]) -> list[str]:
    """Put `cluster=<detected>` before train.py's overrides when none of them picks a cluster,
    after Hydra's options (-m, --cfg job), which come first."""
    if any(override.lstrip("+~").split("=")[0] == "cluster" for override in overrides):
        return overrides
    detected = detect_cluster()
    if detected is None:
        return overrides
    name, reason = detected
    from ..launch.environment import global_rank

    if global_rank() == 0:
        print(f"cluster={name} (detected from {reason}; choose another with cluster=...)", file=sys.stderr)
    # Before, it went first: `python train.py -m seed=1,2` in a job was refused as an override after -m.
    is_override = [not arg.startswith("-") and ("=" in arg or arg.startswith("~")) for arg in overrides]
    first = is_override.index(True) if True in is_override else len(overrides)
    return [*overrides[:first], f"cluster={name}", *overrides[first:]]
