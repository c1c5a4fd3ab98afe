"""Tidy up the fresh project and print what to do next."""

from pathlib import Path

LICENSE = "{{ cookiecutter.license }}"
SLUG = "{{ cookiecutter.project_slug }}"

if LICENSE == "none":
    Path("LICENSE").unlink()

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
