"""Keys set or added (+, ++) under a node that the project reads key by key: `speed`, `strategy`,
`cluster` and its `slurm` and `detect`. Nothing reads a key it does not know there, so a
misspelt one (+speed.compiled=default, +cluster.slurm.qos=normal, '++speed={compiled: x}', or
the same in an experiment file) was dropped without a word and the run went on without it. The
maps meant for names of one's own stay open (cluster.slurm.env: variables; cluster.slurm.sbatch:
#SBATCH options), and so do the nodes with a `_target_`, whose added keys targets.py checks
against what their class takes."""

import difflib

from omegaconf import DictConfig, OmegaConf

CLOSED = ("speed", "strategy", "cluster", "cluster.detect", "cluster.slurm")
# Keys that the project reads where a choice sets them, and most choices leave out.
OPTIONAL = {"strategy": ("mpi", "requires", "no_compile", "launcher")}
WHEN_NULL = {"cluster.slurm": "Slurm settings come with a cluster that has them, e.g. cluster=generic"}
_ABSENT = object()


CLOSED_PATHS = {tuple(parent.split(".")) for parent in CLOSED}


def touches_closed(override: str) -> bool:
    """Whether the override sets something under a closed node (cheap: no config needed)."""
    return any(path[:i] in CLOSED_PATHS for path in key_paths(override) for i in range(1, len(path)))


def key_paths(override: str) -> list[tuple[str, ...]]:
    """The keys an override sets: its own, and each key of a mapping given as its value."""
    typed, _, value = override.partition("=")
    key = typed.lstrip("+")
    if typed.startswith("~") or not key:
        return []
    path = tuple(key.split("."))
    return [path, *(path + inner for inner in _inner_keys(value))]


def _inner_keys(value: str) -> list[tuple[str, ...]]:
    if not value.lstrip().startswith("{"):
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_override(f"key={value}").value()
    except Exception:  # Hydra says what is wrong with it
        return []
    return list(_flattened(parsed)) if isinstance(parsed, dict) else []


def _flattened(mapping: dict, prefix: tuple[str, ...] = ()):
    for key, value in mapping.items():
        yield (*prefix, str(key))
        if isinstance(value, dict):
            yield from _flattened(value, (*prefix, str(key)))


def unknown_key(path: tuple[str, ...], base: DictConfig) -> tuple[str, str, DictConfig | None] | None:
    """(parent, key, parent's node) where `path` first leaves `base` under a closed node; the node is
    None where that node is null (cluster=local's slurm). None where the path is known, or leaves
    `base` under an open node (Hydra or targets.py judge that)."""
    for i in range(1, len(path)):
        parent, key = ".".join(path[:i]), path[i]
        node = OmegaConf.select(base, parent, default=_ABSENT)
        if parent not in CLOSED:
            if not isinstance(node, DictConfig):
                return None
            continue
        if not isinstance(node, DictConfig):
            return parent, key, None
        if key not in node and key not in OPTIONAL.get(parent, ()):
            return parent, key, node
    return None


def override_problem(override: str, base: DictConfig, started: str = "", final: DictConfig | None = None) -> str | None:
    """The line for an override that sets a key that a closed node of `base` (the config without
    it) does not have; None where every key it sets is known, or is gone from `final` (the config
    with every override: a ~key after it). `started`: where a resumed run's own start holds the
    override, that folder (the fix is then to drop the key)."""
    typed, _, value = override.partition("=")
    paths = key_paths(override)
    for path in paths:
        found = unknown_key(path, base)
        if found is None or (final is not None and OmegaConf.select(final, ".".join(path), default=_ABSENT) is _ABSENT):
            continue
        parent, key, node = found
        depth = len(parent.split(".")) + 1
        given = f"{override} (from the start of the run in {started})" if started else override
        removal = f"~{'.'.join(path)} with resume=" if started else f"leave {typed} out"
        if node is None:
            return _null_line(given, parent, base, removal)
        leaf = depth == len(path)  # the key that is set, not a mapping on the way to it
        meant = f"{parent}.<key> in place of {parent}.{key}"
        if leaf and path == paths[0]:  # the override's own key: the same with the close one
            meant = f"{parent}.<key>={value}"
        if started:  # typed again it would be refused again: the run trained without it
            meant = f"{removal} (the run trained without it)"
        return _line(given, parent, key, node, meant, removal, leaf)
    return None


def experiment_problem(cfg: DictConfig, base: DictConfig, said: str) -> str | None:
    """The line for a key that an experiment file sets under a closed node of `cfg` and the same
    choices without that file (`base`) do not have. `said`: experiment=<name> and its file."""
    for parent in CLOSED:
        have, had = OmegaConf.select(cfg, parent, default=None), OmegaConf.select(base, parent, default=None)
        if not isinstance(have, DictConfig):
            continue
        if not isinstance(had, DictConfig):
            if parent in WHEN_NULL:
                return _null_line(f"{said} sets {parent}", parent, base, "remove it from that file")
            continue
        for key in (str(key) for key in have if key not in had and key not in OPTIONAL.get(parent, ())):
            meant = f"{parent}.<key> in that file"
            return _line(f"{said} sets {parent}.{key}", parent, key, had, meant, "remove it", in_file=True)
    return None


def _null_line(said: str, parent: str, base: DictConfig, removal: str) -> str:
    group = parent.split(".")[0]
    choice = OmegaConf.select(base, f"hydra.runtime.choices.{group}", default=None)
    where = f" with {group}={choice}" if choice else ""
    instead = f"; {WHEN_NULL[parent]}" if parent in WHEN_NULL else ""
    return f"{said}: {parent} is null{where}, and nothing reads a key added there. Fix: {removal}{instead}"


def _line(
    said: str, parent: str, key: str, node: DictConfig, meant: str, removal: str, leaf: bool = True, in_file=False
) -> str:
    """`meant`: the fix, with <key> for the known key closest to `key`; `in_file`: the key is in a file."""
    known = [str(name) for name in node]
    fix = f"one of those keys, or {removal}"
    if "<key>" not in meant:
        fix = meant
    elif parent == "cluster.slurm" and leaf:  # an #SBATCH option's name (constraint, mail-user) is not a close key's
        option = key.replace("_", "-")
        sbatch, env = (f"cluster.slurm.sbatch.{option}", f"cluster.slurm.env.{key}")
        fix = f"+{sbatch}=... for #SBATCH --{option}, +{env}=... for a variable"
        if in_file:
            fix = f"{sbatch} in that file for #SBATCH --{option}, {env} for a variable"
        fix = f"{fix}, or {removal}"
        if close := difflib.get_close_matches(key, known, n=1, cutoff=0.8):  # a typo, not an option's name
            fix = f"{meant.replace('<key>', close[0])} (#SBATCH options: +cluster.slurm.sbatch.<option>=...)"
    elif close := difflib.get_close_matches(key, known, n=1):
        fix = meant.replace("<key>", close[0])
    said = f"{said}: {parent} has no key {key}, and nothing reads a key added there (its keys: {', '.join(known)})"
    return f"{said}. Fix: {fix}"
