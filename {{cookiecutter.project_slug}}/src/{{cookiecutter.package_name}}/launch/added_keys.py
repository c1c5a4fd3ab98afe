"""Keys added with + (or ++) under a node that the project reads key by key: `speed`, `strategy`,
`cluster` and its `slurm` and `detect`. Nothing reads a key it does not know there, so a
misspelt one (+speed.compiled=default, +cluster.slurm.qos=normal, or the same in an experiment
file) was dropped without a word and the run went on without it. The maps meant for names of
one's own stay open (cluster.slurm.env: variables; cluster.slurm.sbatch: #SBATCH options), and so
do the nodes with a `_target_`, whose added keys targets.py checks against what their class takes."""

import difflib

from omegaconf import DictConfig, OmegaConf

CLOSED = ("speed", "strategy", "cluster", "cluster.detect", "cluster.slurm")

# What to do instead, where a node has another place for names of one's own or may be null.
OWN_NAMES = {
    "cluster.slurm": "an #SBATCH option: +cluster.slurm.sbatch.<option>=..., a variable: +cluster.slurm.env.<NAME>=..."
}
WHEN_NULL = {"cluster.slurm": "Slurm settings come with a cluster that has them, e.g. cluster=generic"}


def closed_parent(override: str) -> tuple[str, str] | None:
    """(parent, key) where `override` sets or adds (+, ++) a key under a closed node; None otherwise."""
    typed = override.partition("=")[0]
    if typed.startswith("~"):
        return None
    parent, _, key = typed.lstrip("+").rpartition(".")
    return (parent, key) if parent in CLOSED else None


def added_key_problem(override: str, base: DictConfig) -> str | None:
    """The line for an override of a key that its closed node does not have in `base` (the config
    without it); None where the node has that key (++ then only sets it). Where it has none, Hydra's
    own refusal ended in "+KEY=... adds one", which led here."""
    parent, key = closed_parent(override)
    node = OmegaConf.select(base, parent, default=None)
    typed, _, value = override.partition("=")
    if not isinstance(node, DictConfig):  # cluster=local's slurm: null
        group = parent.split(".")[0]
        choice = OmegaConf.select(base, f"hydra.runtime.choices.{group}", default=None)
        where = f" with {group}={choice}" if choice else ""
        instead = f"; {WHEN_NULL[parent]}" if parent in WHEN_NULL else ""
        said = f"{override}: {parent} is null{where}, and nothing reads a key added there"
        return f"{said}. Fix: leave {typed} out{instead}"
    known = [str(name) for name in node]
    if key in known:
        return None
    close = _closest(key, known)
    fix = f"{parent}.{close}={value}" if close else f"one of those keys, or leave {typed} out"
    return _line(override, parent, key, known, fix)


def experiment_key_problem(cfg: DictConfig, base: DictConfig, said: str) -> str | None:
    """The line for a key that an experiment file sets under a closed node of `cfg` and the same
    choices without that file (`base`) do not have: nothing read it, as for an override. `said`:
    experiment=<name> and the file."""
    for parent in CLOSED:
        have, had = OmegaConf.select(cfg, parent, default=None), OmegaConf.select(base, parent, default=None)
        if not isinstance(have, DictConfig) or not isinstance(had, DictConfig):
            continue
        known = [str(name) for name in had]
        for key in (str(key) for key in have if key not in had):
            close = _closest(key, known)
            fix = f"{parent}.{close} in that file" if close else "one of those keys, or remove it"
            return _line(f"{said} sets {parent}.{key}", parent, key, known, fix)
    return None


def _closest(key: str, known: list[str]) -> str | None:
    close = difflib.get_close_matches(key, known, n=1)
    return close[0] if close else None


def _line(said: str, parent: str, key: str, known: list[str], fix: str) -> str:
    instead = f"; {OWN_NAMES[parent]}" if parent in OWN_NAMES else ""
    return (
        f"{said}: {parent} has no key {key}, and nothing reads a key added there "
        f"(its keys: {', '.join(known)}). Fix: {fix}{instead}"
    )
