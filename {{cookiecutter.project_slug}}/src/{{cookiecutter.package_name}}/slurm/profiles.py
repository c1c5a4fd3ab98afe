"""Read the config files that the sbatch renderer needs, without Hydra.

Hydra composes the same files for train.py. Here only what a script needs is read: a
file's `defaults:` from its own group are merged first, then the file itself (Hydra's
order when `_self_` is not listed), so a profile states only what differs from its base.
"""

import fnmatch
import os
import socket
import sys
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[3]
CONFIGS = PROJECT / "configs"


class ProfileError(ValueError):
    """A profile or override that does not exist; the message lists what does."""


def merge(base: dict, update: dict) -> dict:
    """Nested dicts merge key by key; anything else (lists too) is replaced, as in Hydra."""
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def choices(group: str, configs: Path = CONFIGS) -> list[str]:
    return sorted(path.stem for path in (configs / group).glob("*.yaml") if not path.stem.startswith("_"))


def load(group: str, name: str, configs: Path = CONFIGS) -> dict:
    """configs/<group>/<name>.yaml merged over the files its `defaults:` names."""
    path = configs / group / f"{name}.yaml"
    if not path.is_file():
        raise ProfileError(f"{group}={name} does not exist; choose one of: {', '.join(choices(group, configs))}")
    data = yaml.safe_load(path.read_text()) or {}
    merged: dict = {}
    for parent in data.pop("defaults", []):
        if isinstance(parent, str) and parent != "_self_":
            merged = merge(merged, load(group, parent, configs))
    return merge(merged, data)


def set_dotted(config: dict, dotted_key: str, text: str) -> None:
    """`slurm.time=02:00:00` style overrides; unknown keys are refused (a typo would be ignored)."""
    *parents, last = dotted_key.split(".")
    node = config
    for key in parents:
        if not isinstance(node.get(key), dict):
            raise ProfileError(f"cluster.{dotted_key}: no such key in the profile")
        node = node[key]
    if last not in node:
        raise ProfileError(f"cluster.{dotted_key}: no such key; known here: {', '.join(node)}")
    try:
        value = yaml.safe_load(text)  # numbers, lists, null, ...
    except yaml.YAMLError as error:
        raise ProfileError(f"cluster.{dotted_key}={text}: not a value ({error.problem}); quote it or fix it") from None
    # ... but a string stays a string: YAML would read a time such as 12:00:00 as a number;
    # `null` clears any value (e.g. cluster.slurm.mpi=null: the cluster's own default).
    keep_text = isinstance(node[last], str) or (node[last] is None and ":" in text)
    node[last] = text if keep_text and value is not None else value


def detect_cluster(
    env=os.environ, hostnames: list[str] | None = None, configs: Path = CONFIGS
) -> tuple[str, str] | None:
    """The profile whose `detect:` matches SLURM_CLUSTER_NAME, else the host name: (name, why)."""
    if hostnames is None:
        hostnames = [socket.gethostname()]  # not getfqdn(): a DNS lookup can stall every start
    profiles = {name: load("cluster", name, configs).get("detect") or {} for name in choices("cluster", configs)}
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
    """Put `cluster=<detected>` before train.py's overrides when none of them picks a cluster."""
    if any(override.lstrip("+~").split("=")[0] == "cluster" for override in overrides):
        return overrides
    detected = detect_cluster()
    if detected is None:
        return overrides
    name, reason = detected
    from ..launch.environment import global_rank

    if global_rank() == 0:
        print(f"cluster={name} (detected from {reason}; choose another with cluster=...)", file=sys.stderr)
    return [f"cluster={name}", *overrides]
