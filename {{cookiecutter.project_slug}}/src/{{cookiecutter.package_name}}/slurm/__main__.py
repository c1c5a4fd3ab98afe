"""Render (and optionally submit) an sbatch script from the cluster profiles.

python -m {{ cookiecutter.package_name }}.slurm cluster=lumi strategy=deepspeed nodes=2
python -m {{ cookiecutter.package_name }}.slurm cluster=mahti gpus=2 test=true -o job.sh
python -m {{ cookiecutter.package_name }}.slurm cluster=puhti launcher=torchrun nodes=2 --submit -- trainer.max_epochs=5
python -m {{ cookiecutter.package_name }}.slurm --write-scripts      # re-render scripts/run-gpu{1,4,8}.sh
"""

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from .profiles import ProfileError, detect_cluster, load, set_dotted
from .render import LAUNCHERS, Job, render, script_targets, strategy_launcher, write_scripts

SETTINGS = ("cluster", "strategy", "launcher", "nodes", "gpus", "test")


def parse_args(argv: list[str]) -> argparse.Namespace:
    train_overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(
        prog=f"python -m {__package__}",
        description="Render an sbatch script from configs/cluster/<cluster>.yaml; print it, write it or submit it.",
        epilog=(
            "settings: cluster=NAME strategy=NAME nodes=N gpus=N (per node; default: all of a node) "
            f"launcher={'|'.join(LAUNCHERS)} test=true (test partition), and cluster.KEY=VALUE for any profile "
            "value, e.g. cluster.slurm.time=12:00:00. Arguments after -- become train.py overrides."
        ),
    )
    parser.add_argument("settings", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("-o", "--output", type=Path, help="write the script here instead of printing it")
    parser.add_argument("--submit", action="store_true", help="write the script (to logs/ without -o) and sbatch it")
    parser.add_argument("--write-scripts", action="store_true", help="re-render scripts/ from slurm_scripts.yaml")
    args = parser.parse_args(argv)
    args.train_overrides = train_overrides
    return args


def job_from(settings: list[str], train_overrides: list[str], command: str) -> Job:
    values, profile_overrides = {}, []
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or (key not in SETTINGS and not key.startswith("cluster.")):
            raise ProfileError(f"{setting!r}: expected KEY=VALUE with KEY one of {', '.join(SETTINGS)} or cluster.*")
        if key.startswith("cluster."):
            profile_overrides.append((key.removeprefix("cluster."), value))
        else:
            values[key] = value
    targets = script_targets()
    if "cluster" not in values:
        detected = detect_cluster()
        values["cluster"] = detected[0] if detected else targets["cluster"]
    cluster = load("cluster", values["cluster"])
    for key, value in profile_overrides:
        set_dotted(cluster, key, value)
    strategy = values.get("strategy", targets["strategy"])
    return Job(
        cluster=cluster,
        strategy=strategy,
        launcher=values.get("launcher") or strategy_launcher(strategy),
        nodes=int(values.get("nodes", 1)),
        gpus_per_node=int(values["gpus"]) if "gpus" in values else None,
        test=str(values.get("test", "false")).lower() in ("1", "true", "yes"),
        train_overrides=train_overrides,
        rendered_by=command,
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        if args.write_scripts:
            for path in write_scripts():
                print(f"wrote {path}")
            return 0
        job = job_from(args.settings, args.train_overrides, shlex.join(["python", "-m", __package__, *argv]))
    except ProfileError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    output = args.output
    if args.submit and output is None:
        output = Path("logs") / f"sbatch-{job.cluster['name']}-{job.nodes}x{job.gpus}-{job.launcher}.sh"
    text = render(job).replace("THIS_SCRIPT", str(output) if output else "SCRIPT")
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
