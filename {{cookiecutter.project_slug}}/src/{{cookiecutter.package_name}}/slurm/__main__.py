"""Render (and optionally submit) an sbatch script from the cluster profiles.

python -m {{ cookiecutter.package_name }}.slurm cluster=lumi strategy=deepspeed nodes=2
python -m {{ cookiecutter.package_name }}.slurm cluster=mahti gpus=2 test=true -o job.sh
python -m {{ cookiecutter.package_name }}.slurm cluster=puhti launcher=torchrun nodes=2 --submit -- trainer.max_epochs=5
python -m {{ cookiecutter.package_name }}.slurm --write-scripts      # re-render scripts/run-gpu{1,4,8}.sh
"""

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ..launch.command_line import check_arguments
from ..launch.errors import OneLineParser, SetupError
from ..launch.paths import unwritable
from ..launch.run_directory import resume_overrides
from .experiments import check_experiments
from .profiles import ProfileError, detect_cluster, load, override_sign
from .render import LAUNCHERS, Job, render, script_targets, strategy_launcher, train_arguments, write_scripts

SETTINGS = ("cluster", "strategy", "launcher", "nodes", "gpus", "test")
BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def count(key: str, text: str) -> int:
    """nodes=2, gpus=4: a whole number from 1 (a Job refuses 0 and negatives with the fix)."""
    if re.fullmatch(r"-?\d+", text):  # not int()'s 2_0 (20) or " 2"
        return int(text)
    every = ", or all (every GPU of a node)" if key == "gpus" else ""
    raise ProfileError(f"{key}={text}: a whole number from 1{every}, e.g. {key}=2")


def parse_args(argv: list[str]) -> argparse.Namespace:
    train_overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = OneLineParser(
        prog=f"python -m {__package__}",
        description="Render an sbatch script from configs/cluster/<cluster>.yaml; print it, write it or submit it.",
        epilog=(
            "settings: cluster=NAME strategy=NAME nodes=N gpus=N|all (per node; default: all of a node) "
            f"launcher={'|'.join(LAUNCHERS)} test=true (test partition), and cluster.KEY=VALUE for any profile "
            "value, e.g. cluster.slurm.time=12:00:00 (Hydra's override syntax; +cluster.slurm.sbatch.OPTION=VALUE "
            "adds an #SBATCH option, +cluster.slurm.env.NAME=VALUE a variable). "
            "Arguments after -- become train.py overrides."
        ),
    )
    parser.add_argument("settings", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("-o", "--output", type=Path, help="write the script here instead of printing it")
    parser.add_argument("--submit", action="store_true", help="write the script (to logs/ without -o) and sbatch it")
    parser.add_argument("--write-scripts", action="store_true", help="re-render scripts/ from slurm_scripts.yaml")
    args = parser.parse_intermixed_args(argv)  # settings also after an option: cluster=lumi -o job.sh nodes=2
    args.train_overrides = train_overrides
    return args


def job_from(settings: list[str], train_overrides: list[str], command: str) -> Job:
    values, profile_overrides = {}, []
    for setting in settings:
        key, sep, value = setting.partition("=")
        profile_key = key.lstrip("+~").startswith("cluster.")
        if not (sep or key.startswith("~")) or (key not in SETTINGS and not profile_key):
            raise ProfileError(f"{setting!r}: expected KEY=VALUE with KEY one of {', '.join(SETTINGS)} or cluster.*")
        if key.lstrip("+~") == "cluster.name":  # the script names the profile by its file: cluster=<name> met no such
            raise ProfileError(
                f"{setting}: a profile's name is its file's, which the script gives train.py. Fix: leave it out; for "
                f"a profile of your own, copy configs/cluster/<one>.yaml to configs/cluster/{value or '<name>'}.yaml"
            )
        if key.lstrip("+~") == "cluster.num_nodes":  # the script gives train.py the job's own: dropped without a word
            fix = f"nodes={value}" if value else "leave it out"
            raise ProfileError(f"{setting}: a job's nodes are its setting nodes=N. Fix: {fix}")
        if profile_key:  # a Hydra override of the profile: cluster.KEY=VALUE, +cluster.KEY=VALUE (++), ~cluster.KEY
            sign = override_sign(setting)
            profile_overrides.append(sign + setting.removeprefix(sign).removeprefix("cluster."))
        else:
            values[key] = value
    targets = script_targets()
    if "cluster" not in values:
        detected = detect_cluster()
        values["cluster"] = detected[0] if detected else targets["cluster"]
    cluster = load("cluster", values["cluster"], overrides=profile_overrides)
    strategy = values.get("strategy", targets["strategy"])
    test = values.get("test", "false")
    if test.lower() not in BOOLEANS:
        raise ProfileError(f"test={test}: use test=true (the test partition and its time limit) or test=false")
    timed = [setting for setting in profile_overrides if setting.lstrip("+~").split("=")[0] == "slurm.time"]
    if BOOLEANS[test.lower()] and timed:  # the job took test_time, and the time given was dropped without a word
        raise ProfileError(
            f"cluster.{timed[-1].lstrip('+~')} with test=true: a test job's time limit is cluster.slurm.test_time "
            "(the test partition's). Fix: cluster.slurm.test_time=..., or leave out test=true"
        )
    gpus = values.get("gpus", "all")
    # The profile's training keys given here (cluster.precision=..., cluster.accelerator=...) train as given too:
    # the script names only the profile (cluster=puhti), and they were left on this machine without a word.
    # The job's size is its own (nodes=, gpus=); slurm.* is what is rendered.
    training = [setting for setting in settings if _trains(setting)]
    return Job(
        cluster=cluster,
        strategy=strategy,
        launcher=values["launcher"] if "launcher" in values else strategy_launcher(strategy),  # launcher= is refused
        nodes=count("nodes", values.get("nodes", "1")),
        gpus_per_node=None if gpus == "all" else count("gpus", gpus),
        test=BOOLEANS[test.lower()],
        train_overrides=[*training, *train_overrides],
        rendered_by=command,
        profile_settings=[setting for setting in settings if setting.lstrip("+~").startswith("cluster.")],
    )


def _trains(setting: str) -> bool:
    """A value of the profile's that training reads (cluster.precision=...): not the job's size, nor
    what only the renderer reads, nor a deletion (~cluster.precision: trainer.* reads it)."""
    key = setting.lstrip("+").partition("=")[0]
    renderer_only = ("slurm", "devices", "num_nodes", "detect", "internet")
    return key.startswith("cluster.") and key.split(".")[1] not in renderer_only


# train.py's overrides that the job's own settings set (the script puts them first): after --,
# Hydra would let the last one win without a word, and the job would not be the one asked for.
SET_BY_THE_JOB = {
    "cluster": "cluster={value}",
    "strategy": "strategy={value}",
    "cluster.num_nodes": "nodes={value}",
    "trainer.num_nodes": "nodes={value}",
    "cluster.devices": "gpus={value}",
    "trainer.devices": "gpus={value}",
}


# train.py's options that print or check instead of training (Hydra's)
PRINTING_OPTIONS = {"--cfg", "-c", "--help", "-h", "--hydra-help", "--info", "-i", "--version", "--resolve", "-p"}
PRINTING_OPTIONS |= {"--package", "--shell-completion", "-sc"}


def check_train_overrides(train_overrides: list[str], settings: list[str]) -> None:
    keys = {override.lstrip("+~").partition("=")[0]: override for override in train_overrides}
    if "ckpt_path" in keys and keys["ckpt_path"].endswith("=last") and not {"run_id", "resume"} & keys.keys():
        # a new job's run is slurm-<its job id>, with no checkpoint yet: refused on the nodes, after the queue
        raise ProfileError(
            "-- ckpt_path=last: the newest checkpoint of this job's own run (outputs/slurm-<job id>), which a new "
            "job has none of (a requeue resumes by itself). Fix: -- resume=outputs/<the run to continue>"
        )
    for override in train_overrides:
        if override in PRINTING_OPTIONS:  # the job would print, not train, and exit 0
            raise ProfileError(
                f"-- {override}: an option of train.py's, with which the job would not train (it prints or "
                f"checks, then ends with exit 0). Fix: run python train.py {override} ... here, and leave it out "
                "of the job"
            )
        key, _, value = override.lstrip("+~").partition("=")
        if key in SET_BY_THE_JOB or key.startswith("cluster."):
            setting = SET_BY_THE_JOB.get(key, "{override}").format(value=value, override=override)
            said = (
                f"-- {override}: the job's {key} comes from this command's settings, which the script gives "
                "train.py first (the last one would win on the nodes)"
            )
            if key not in SET_BY_THE_JOB and (refusal := _refusal_before_separator(override, settings)):
                raise ProfileError(f"{said}; before -- it is refused too: {refusal}")  # its fix, not a second step
            raise ProfileError(f"{said}. Fix: {setting} before --")


def _refusal_before_separator(setting: str, settings: list[str]) -> str | None:
    """Why this command refuses a setting of the profile given among its own settings, if it does
    (not where it refuses the others already: that is said once the setting is moved)."""
    try:
        job_from(settings, [], "")
    except (ProfileError, SetupError):
        return None
    try:
        job_from([*settings, setting], [], "")
    except (ProfileError, SetupError) as error:
        return str(error)
    return None


def batch_script(path: Path) -> bool:
    """A batch script (this command's, or another: `#!` first, #SBATCH lines), which -o may write again.
    A file that only mentions #SBATCH is not one: README.md, the scripts' template, a profile."""
    try:
        with path.open(errors="replace") as file:
            lines = file.read(65536).splitlines()
    except OSError:
        return False
    return bool(lines) and lines[0].startswith("#!") and any(line.startswith("#SBATCH") for line in lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        for argument in argv:  # each lands in the script's comments, where a newline would start a command
            if not argument.isprintable():
                raise ProfileError(f"{argument!r}: arguments must be one line of printable text")
        if args.write_scripts:
            ignored = [*args.settings, *(["-o"] if args.output else []), *(["--submit"] if args.submit else [])]
            if ignored or args.train_overrides:  # before: rendered the usual scripts, the rest ignored
                raise ProfileError(
                    f"--write-scripts with {' '.join(ignored + args.train_overrides)}: it renders scripts/ from "
                    "configs/slurm_scripts.yaml alone. Fix: change that file, or render one script without "
                    "--write-scripts"
                )
            for path in write_scripts():
                print(f"wrote {path}")
            return 0
        sweep = next((arg for arg in args.train_overrides if arg in ("-m", "--multirun")), None)
        if sweep:
            raise ProfileError(
                f"{sweep}: a batch script runs one training. Fix: for a sweep, submit a job per point with "
                "python train.py -m hydra/launcher=slurm cluster=<name> <key>=<a>,<b>"
            )
        check_train_overrides(args.train_overrides, args.settings)
        job = job_from(args.settings, args.train_overrides, shlex.join(["python", "-m", __package__, *argv]))
        output = args.output
        if args.submit and output is None:
            output = Path("logs") / f"sbatch-{job.cluster['name']}-{job.nodes}x{job.gpus}-{job.launcher}.sh"
        reason = output and unwritable(output, folder=False)
        if reason:
            raise ProfileError(f"-o {output} {reason}. Fix: -o a file of yours, e.g. -o job.sh")
        if output and output.is_file() and not batch_script(output):  # -o train.py replaced the project's own
            raise ProfileError(
                f"-o {output}: a file that is not a batch script, which writing would replace. Fix: -o a new "
                "file, e.g. -o job.sh"
            )
        if args.submit and shutil.which("sbatch") is None:
            raise ProfileError(
                "--submit: sbatch is not on PATH (not a Slurm login node?). Fix: run this on the cluster, or "
                "write the script with -o job.sh and submit it there with sbatch job.sh"
            )
        # What train.py checks on the nodes, now: a wrong override would otherwise wait in the queue to fail.
        resumed = resume_overrides(train_arguments(job))  # a resume=: the run's own overrides too
        check_arguments(resumed)
        check_experiments(job, resumed)
        text = render(job).replace("THIS_SCRIPT", str(output) if output else "SCRIPT")
    except (ProfileError, SetupError) as error:  # before any file is written
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    if output is None:
        print(text, end="")
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    output.chmod(0o755)
    print(f"wrote {output}", file=sys.stderr)
    if args.submit:
        Path("logs").mkdir(exist_ok=True)  # sbatch writes logs/%x-%j.out and cannot create the folder
        return subprocess.run(["sbatch", str(output)]).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
