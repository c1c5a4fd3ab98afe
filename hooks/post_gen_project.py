"""Tidy up the fresh project, render its Slurm scripts and print what to do next.

The answers were checked before any file was made (local_extensions.py). They reach this
script as JSON inside a raw string, never pasted into its code: JSON escapes every quote and
backslash, so no answer can end the string early.
"""

import importlib
import json
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")
SLUG, PACKAGE = ANSWERS["project_slug"], ANSWERS["package_name"]

if ANSWERS["license"] == "none":
    Path("LICENSE").unlink()

# scripts/run-gpu{1,4,8}.sh come from the project's own renderer, so that they never differ
# from what `python -m <package>.slurm --write-scripts` writes later. It needs only the
# standard library and PyYAML (a dependency of cookiecutter), not the project's own
# dependencies, so it runs in whatever Python runs cookiecutter.
sys.path.insert(0, "src")
importlib.import_module(f"{PACKAGE}.slurm.render").write_scripts(Path.cwd())

extras = "dev,wandb" if ANSWERS["logger"] == "wandb" else "dev"  # the default logger must import
print(
    f"""
Created {SLUG}/. Next steps:

    cd {SLUG}
    python -m venv .venv && source .venv/bin/activate
    pip install -e '.[{extras}]'
    python train.py experiment=smoke          # a 10-second check on synthetic data
    python train.py                           # MNIST on this machine
    pytest                                    # the project's own tests

On a Slurm cluster: see README.md, section "On a cluster".
"""
)
