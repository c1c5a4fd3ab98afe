"""Bake the template into temporary directories, as a user would with `cookiecutter`."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TEMPLATE))  # local_extensions, the answers' checks and filters
CHOICES = json.loads((TEMPLATE / "cookiecutter.json").read_text())["_choices"]


def bake(output_dir: Path, **answers: str) -> Path:
    return Path(cookiecutter(str(TEMPLATE), no_input=True, extra_context=answers, output_dir=str(output_dir)))


def bake_cli(output_dir: Path, *answers: str) -> subprocess.CompletedProcess:
    """The cookiecutter command line, for what a user sees (messages, exit code)."""
    command = [sys.executable, "-m", "cookiecutter", str(TEMPLATE), "--no-input", "-o", str(output_dir), *answers]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def default_project(tmp_path_factory) -> Path:
    return bake(tmp_path_factory.mktemp("default"))
