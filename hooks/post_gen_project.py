"""Tidy up the fresh project, render its Slurm scripts and print what to do next."""

import importlib
import sys
from pathlib import Path

LICENSE = "{{ cookiecutter.license }}"
SLUG = "{{ cookiecutter.project_slug }}"

if LICENSE == "none":
    Path("LICENSE").unlink()

# scripts/run-gpu{1,4,8}.sh come from the project's own renderer, so that they never differ
# from what `python -m <package>.slurm --write-scripts` writes later. It needs only the
# standard library and PyYAML (a dependency of cookiecutter), not the project's own
# dependencies, so it runs in whatever Python runs cookiecutter.
sys.path.insert(0, "src")
importlib.import_module("{{ cookiecutter.package_name }}.slurm.render").write_scripts(Path.cwd())

print(
    f"""
Created {SLUG}/. Next steps:

    cd {SLUG}
    python -m venv .venv && source .venv/bin/activate
    pip install -e '.[dev]'
    python train.py experiment=smoke          # a 10-second check on synthetic data
    python train.py                           # MNIST on this machine
    pytest                                    # the project's own tests

On a Slurm cluster: see README.md, section "On a cluster".
"""
)
