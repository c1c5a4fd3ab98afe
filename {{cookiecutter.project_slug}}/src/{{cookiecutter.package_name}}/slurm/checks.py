"""Checks and quoting for every profile value that reaches an sbatch script: #SBATCH values are
one word each (a newline would start a shell line), numbers are numbers, sizes and times are
Slurm's; words on shell lines are quoted so that $VARIABLES expand and nothing else runs."""

import math
import re
import shlex

import yaml

from .profiles import ProfileError

NAME = re.compile(r"[\w.+@-]+")  # account, partition, GPU type, MPI plugin
SIZE = re.compile(r"(\d+)([KMGT]?)")  # --mem
TIME = re.compile(r"(\d+-)?\d+(:\d+){0,2}|UNLIMITED|INFINITE")  # --time: minutes, [D-]HH:MM:SS, ...
SIGNAL_SECONDS = 90  # the warning before the time limit (--signal): enough to write a checkpoint
# A shorter job would be signalled before it trained (Slurm may signal up to a minute early),
# and requeue itself again and again.
SHORTEST_SECONDS = 3 * 60
GRES = re.compile(r"[\w:.,-]+")
GPU_KINDS = ("gres", "gpus-per-node", "none")
OPTION = re.compile(r"[a-z][a-z0-9-]*")  # an sbatch option's long name
OPTION_VALUE = re.compile(r"[\w@%+=:,./|&!*\[\]()-]+")  # one word on an #SBATCH line, e.g. a constraint a100|h100
# The #SBATCH options that the profile's other keys (or the scripts themselves) set.
SET_ELSEWHERE = {
    "account": "cluster.slurm.account",
    "partition": "cluster.slurm.partition (or partitions)",
    "time": "cluster.slurm.time",
    "nodes": "nodes= (cluster.num_nodes)",
    "ntasks-per-node": "gpus= (cluster.devices): a task per GPU",
    "cpus-per-task": "cluster.slurm.cpus_per_gpu",
    "mem": "cluster.slurm.mem_per_gpu (or mem_full_node)",
    "gres": "cluster.slurm.gpus and gpu_type (local_scratch: its gres)",
    "gpus-per-node": "cluster.slurm.gpus and gpu_type",
    **dict.fromkeys(("job-name", "output", "open-mode", "signal", "requeue"), "the script itself (logs and requeue)"),
}
SAFE_WORD = re.compile(r"[\w@%+=:,./-]+")  # shlex.quote leaves these as they are
VARIABLE = re.compile(r"(\$(?:[A-Za-z_]\w*|\{[A-Za-z_]\w*\}))")  # $NAME or ${NAME}


def shell_word(value) -> str:
    """A profile value as one shell word: $VARIABLES expand, nothing else does ($(...) stays text)."""
    text = str(value)
    if SAFE_WORD.fullmatch(text):
        return text
    if VARIABLE.search(text):  # '$HOME/my venv' stayed that text: the venv was not found, without a word
        return f'"{in_double_quotes(text)}"'
    return shlex.quote(text)


def in_double_quotes(value) -> str:
    """Text for inside "...": $VARIABLES expand; $(...), backquotes, quotes and backslashes do not.
    YAML's true is "true" (not Python's "True")."""
    parts = VARIABLE.split(str(value).lower() if isinstance(value, bool) else str(value))  # odd indexes: variables
    return "".join(part if i % 2 else re.sub(r'([\\"`$])', r"\\\1", part) for i, part in enumerate(parts))


def unset_safe(text: str) -> str:
    """$NAME -> ${NAME:-unset}: the script runs under `set -u`, where a missing variable aborts it."""
    return VARIABLE.sub(lambda match: "${" + match.group(1).strip("${}") + ":-unset}", text)


def refuse(key: str, value, allowed: str) -> ProfileError:
    shown = value if str(value).isprintable() else repr(value)  # the message stays one line
    return ProfileError(f"{key}={shown}: {allowed}")


def check_profile(cluster: dict) -> None:
    """Every value that reaches the script, checked; the message names the key and the fix."""
    where = f"(configs/cluster/{cluster['name']}.yaml or cluster.KEY=VALUE)"
    if not NAME.fullmatch(str(cluster["name"])):
        raise refuse("cluster.name", cluster["name"], f"a name of letters, digits and . _ + @ - {where}")
    devices = cluster.get("devices")
    if not is_count(devices):
        raise refuse("cluster.devices", devices, f"GPUs per node, a whole number from 1 {where}")
    slurm = cluster["slurm"]
    if not is_count(slurm.get("cpus_per_gpu")):
        raise refuse("cluster.slurm.cpus_per_gpu", slurm.get("cpus_per_gpu"), f"a whole number from 1 {where}")
    if slurm.get("gpus", "gres") not in GPU_KINDS:
        raise refuse("cluster.slurm.gpus", slurm.get("gpus"), f"one of {', '.join(GPU_KINDS)} {where}")
    for key in ("mem_per_gpu", "mem_full_node"):
        size = SIZE.fullmatch(str(slurm[key])) if slurm.get(key) is not None else None
        if slurm.get(key) is not None and not size:
            raise refuse(f"cluster.slurm.{key}", slurm[key], f"a size such as 64G (number, K/M/G/T) or null {where}")
        if size and int(size[1]) and not size[2]:  # 64: Slurm reads megabytes, and the job is killed at its start
            unit = f"; Slurm reads {size[1]} as megabytes. Fix: cluster.slurm.{key}={size[1]}G (or {size[1]}M)"
            raise refuse(f"cluster.slurm.{key}", slurm[key], f"a size with its unit, such as 64G {where}{unit}")
    if slurm.get("mem_per_gpu") is not None and int(SIZE.fullmatch(str(slurm["mem_per_gpu"]))[1]) == 0:
        # 0 left --mem out (the partition's default), 0G asked for all of the node's memory (Slurm's --mem=0)
        raise refuse(
            "cluster.slurm.mem_per_gpu",
            slurm["mem_per_gpu"],
            f"a size above 0 such as 64G, or null for the partition's default (a whole node's: mem_full_node) {where}",
        )
    for key in ("time", "test_time"):
        if not TIME.fullmatch(str(slurm.get(key))):
            raise refuse(f"cluster.slurm.{key}", slurm.get(key), f"a Slurm time such as 12:00:00 or 2-00:00:00 {where}")
        check_not_sexagesimal(f"cluster.slurm.{key}", slurm[key], where)
        if seconds(slurm[key]) < SHORTEST_SECONDS:
            raise refuse(
                f"cluster.slurm.{key}",
                slurm[key],
                f"at least {slurm_time(SHORTEST_SECONDS)}: the job saves and requeues itself {SIGNAL_SECONDS} s before "
                f"its time limit (Slurm may signal a minute earlier), so a shorter job would requeue before it "
                f"trained, again and again {where}",
            )
    names = {key: slurm.get(key) for key in ("account", "partition", "test_partition", "gpu_type", "mpi")}
    rules = slurm.get("partitions") or []
    if not isinstance(rules, list) or not all(isinstance(rule, dict) and "name" in rule for rule in rules):
        raise refuse("cluster.slurm.partitions", rules, "a list such as '[{name: gpu, max_gpus: 8}]' " + where)
    names.update({f"partitions.{i}.name": rule["name"] for i, rule in enumerate(rules)})
    for key, value in names.items():
        if value is not None and not NAME.fullmatch(str(value)):
            none = ", or null for none" if value == "" else ""  # account='': no --account line is null
            raise refuse(f"cluster.slurm.{key}", value, f"a name of letters, digits and . _ + @ -{none} {where}")
    for i, rule in enumerate(rules):
        for limit in ("max_gpus", "max_gpus_per_node", "max_nodes"):
            if rule.get(limit) is not None and not is_count(rule[limit]):
                raise refuse(f"cluster.slurm.partitions.{i}.{limit}", rule[limit], f"a count from 1 or null {where}")
        if rule.get("max_time") is not None and not TIME.fullmatch(str(rule["max_time"])):
            raise refuse(f"cluster.slurm.partitions.{i}.max_time", rule["max_time"], f"a Slurm time or null {where}")
        check_not_sexagesimal(f"cluster.slurm.partitions.{i}.max_time", rule.get("max_time"), where)
    if slurm.get("test_max_nodes") is not None and not is_count(slurm["test_max_nodes"]):
        raise refuse("cluster.slurm.test_max_nodes", slurm["test_max_nodes"], f"a count from 1 or null {where}")
    for key in ("module_use", "modules", "srun_args", "full_node_srun_args"):
        if not isinstance(slurm.get(key) or [], list):
            raise refuse(f"cluster.slurm.{key}", slurm[key], f"a list, e.g. '[{slurm[key]}]' {where}")
        for i, item in enumerate((slurm.get(key) or []) if "srun" in key else []):
            # The script quotes each item as one word: '--exclusive --mem=0' was one option on the
            # nodes. An option's value may hold spaces ('--comment=a b').
            if re.search(r"\S\s+-", str(item)):
                raise refuse(f"cluster.slurm.{key}.{i}", repr(item), f"one option per item (a list of several) {where}")
    env = slurm.get("env") or {}
    if not isinstance(env, dict):
        raise refuse(
            "cluster.slurm.env",
            env,
            f"variable names and their values, each added with +cluster.slurm.env.NAME=value {where}",
        )
    for name, value in env.items():
        if not re.fullmatch(r"[A-Za-z_]\w*", str(name)):
            raise refuse(
                f"cluster.slurm.env.{name}",
                value,
                f"a variable's name: letters, digits and _, not a digit first {where}",
            )
        if not isinstance(value, str | int | float):  # exported as "[1, 2]", "None"; true as true
            raise refuse(
                f"cluster.slurm.env.{name}",
                yaml.safe_dump(value, default_flow_style=True).splitlines()[0],  # as typed: null, [1, 2]
                f"one value: a string, a number, true or false (~cluster.slurm.env.{name} leaves it out) {where}",
            )
    check_sbatch_extras(slurm.get("sbatch"), where)
    scratch = slurm.get("local_scratch")
    if scratch is not None and not (
        isinstance(scratch, dict) and scratch.get("path") and GRES.fullmatch(str(scratch.get("gres") or "x"))
    ):
        raise refuse("cluster.slurm.local_scratch", scratch, "null or {path: $LOCAL_SCRATCH, gres: nvme:100} " + where)
    try:
        shlex.split(str(slurm.get("container") or ""))
    except ValueError as error:
        raise refuse("cluster.slurm.container", slurm["container"], f"a command prefix ({error}) {where}") from None


def check_sbatch_extras(extras, where: str) -> None:
    """cluster.slurm.sbatch: {option: value or null}, each an #SBATCH line of its own."""
    if not isinstance(extras or {}, dict):
        raise refuse("cluster.slurm.sbatch", extras, "#SBATCH options by long name, e.g. '{qos: normal}' " + where)
    for option, value in (extras or {}).items():
        key = f"cluster.slurm.sbatch.{option}"
        if option in SET_ELSEWHERE:
            raise refuse(key, value, f"--{option} comes from {SET_ELSEWHERE[option]}: set it there {where}")
        if not OPTION.fullmatch(str(option)):
            raise refuse(key, value, f"an sbatch option's long name without dashes, e.g. qos or constraint {where}")
        if value is not None and not OPTION_VALUE.fullmatch(str(value)):
            raise refuse(key, value, f"one word (no spaces, quotes, $ or #), or null for a flag {where}")


def check_not_sexagesimal(key: str, time, where: str) -> None:
    """YAML reads an unquoted 12:00:00 as the number 43200, which Slurm takes as minutes (30 days)."""
    if isinstance(time, int) and time >= 10000:  # minutes: about a week; 3:00:00 reads as 10800
        raise refuse(
            key,
            time,
            f"{time} minutes, as Slurm reads a number: YAML reads an unquoted 12:00:00 as 43200. "
            f'Fix: quote the time in the profile, e.g. "12:00:00" (days: "7-00:00:00") {where}',
        )


def seconds(time) -> float:
    """A Slurm time in seconds (inf: UNLIMITED): minutes, minutes:seconds, hours:minutes:seconds,
    days-hours, days-hours:minutes or days-hours:minutes:seconds."""
    if str(time) in ("UNLIMITED", "INFINITE"):
        return math.inf
    days, dash, clock = str(time).rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if dash:
        hours, minutes, secs = (parts + [0, 0])[:3]
    else:
        hours, minutes, secs = {1: [0, *parts, 0], 2: [0, *parts], 3: parts}[len(parts)]
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + secs


def slurm_time(total: float) -> str:
    """Seconds as Slurm's [D-]HH:MM:SS."""
    days, rest = divmod(int(total), 24 * 3600)
    return f"{days}-" * bool(days) + f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"


def is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
