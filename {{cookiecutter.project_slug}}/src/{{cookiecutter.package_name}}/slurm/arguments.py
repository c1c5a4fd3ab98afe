"""Run by a rendered script on its first node, before the launch, when the script is given
arguments (`sbatch scripts/run-gpu8.sh experiment=big`):

    python -m {{ cookiecutter.package_name }}.slurm.arguments <the renderer's settings> -- <train.py overrides> \
        <the script

An experiment among them is read by train.py, after sbatch read the script's #SBATCH lines: what
the file asks of the job (its cluster.slurm.time, nodes, strategy) would change nothing, without
a word. Exit 2 with one line and the command that renders and submits a script for it (a script
edited by hand to the file's values passes). Anything else wrong is train.py's to say."""

import shlex
import sys


def main(argv: list[str] | None = None, script: str | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    settings, overrides = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    if not any(override.lstrip("+").startswith("experiment=") for override in overrides):
        return 0  # no composition (seconds of a node's time) for the usual arguments
    from ..launch.errors import SetupError
    from .__main__ import job_from
    from .experiments import find_conflict
    from .profiles import ProfileError

    try:
        job = job_from(settings, [], "")
        conflict = find_conflict(job, overrides, sys.stdin.read() if script is None else script)
    except (ProfileError, SetupError):  # a wrong override, a profile changed since: train.py says it
        return 0
    if conflict is None:
        return 0
    key = conflict.fix.lstrip("+~").partition("=")[0]
    fixed = [setting for setting in settings if setting.lstrip("+~").partition("=")[0] != key] + [conflict.fix]
    command = shlex.join(["python", "-m", __package__, *fixed, "--submit", "--", *overrides])
    print(f"ERROR: {conflict.script_line(command)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
