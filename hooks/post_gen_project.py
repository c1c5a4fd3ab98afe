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
# from what `python -m <package>.slurm --write-scripts` writes later. It reads the profiles
# with Hydra (hydra-core, no torch); when the Python that runs cookiecutter lacks it (pipx),
# the scripts are rendered after `pip install`, and the next steps say so.
RENDER_LATER = ""
sys.path.insert(0, "src")
try:
    render = importlib.import_module(f"{PACKAGE}.slurm.render")
except ModuleNotFoundError as missing:
    if missing.name.split(".")[0] not in ("hydra", "omegaconf", "antlr4", "jinja2", "yaml"):
        raise
    RENDER_LATER = (
        f"\n    python -m {PACKAGE}.slurm --write-scripts"
        f"   # scripts/run-gpu*.sh ({missing.name} was missing at bake time)"
    )
else:
    render.write_scripts(Path.cwd())

extras = "dev,wandb" if ANSWERS["logger"] == "wandb" else "dev"  # the default logger must import
print(
    f"""
Created {SLUG}/. Next steps:

    cd {SLUG}
    python -m venv .venv && source .venv/bin/activate
    pip install -e '.[{extras}]'{RENDER_LATER}
    python train.py experiment=smoke          # a 10-second check on synthetic data
    python train.py                           # MNIST on this machine
    pytest                                    # the project's own tests

On a Slurm cluster: see README.md, section "On a cluster".
"""
)
