"""Baking: every answer set gives a clean project; bad answers leave nothing behind."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import CHOICES, TEMPLATE, bake, bake_cli


def ruff(project, *args):
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=project, capture_output=True, text=True)


def assert_ruff_clean(project):
    for args in (["check", "."], ["format", "--check", "."]):
        result = ruff(project, *args)
        assert result.returncode == 0, f"ruff {' '.join(args)} in {project}:\n{result.stdout}{result.stderr}"


def test_default_bake_has_the_promised_layout(default_project):
    package = default_project / "src" / "mnist_ddp"
    for path in ["pyproject.toml", "README.md", "train.py", "configs/train.yaml", ".github/workflows/tests.yml"]:
        assert (default_project / path).is_file(), path
    for group in ["strategy", "cluster", "model", "data", "trainer", "logger", "experiment"]:
        assert list((default_project / "configs" / group).glob("*.yaml")), group
    assert (package / "run.py").is_file()
    assert not list(default_project.rglob("*{{*")), "unrendered file names"
    for path in default_project.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".yaml", ".toml", ".md", ".sh", ".yml"}:
            assert "cookiecutter." not in path.read_text(), f"unrendered template variable in {path}"


def test_template_tooling_is_ruff_clean():
    assert_ruff_clean(TEMPLATE)  # hooks/ and tests/; the Jinja project directory is excluded


def test_default_bake_is_ruff_clean(default_project, tmp_path):
    assert_ruff_clean(default_project)
    # Not yet a git repository, after a DeepSpeed run: its checkpoints hold DeepSpeed's own scripts.
    project = tmp_path / default_project.name
    shutil.copytree(default_project, project, ignore=shutil.ignore_patterns(".git"))
    scripts = project / "outputs" / "run" / "checkpoints" / "last.ckpt"
    scripts.mkdir(parents=True)
    (scripts / "zero_to_fp32.py").write_text("import os, sys\nx=1 ;\n")
    assert_ruff_clean(project)
    checked = ruff(project, "check", "--show-files", ".").stdout
    assert "zero_to_fp32.py" not in checked and f"/{project.name.replace('-', '_')}/data/" in checked, checked


ANSWER_SETS = (
    [{"cluster": c} for c in CHOICES["cluster"]]
    + [{"strategy": s} for s in CHOICES["strategy"]]
    + [{"logger": lg} for lg in CHOICES["logger"]]
    + [{"license": lc} for lc in CHOICES["license"]]
    + [{"project_name": "Weather Net", "python_version": "3.12", "slurm_account": "project_462000007"}]
)


@pytest.mark.parametrize("answers", ANSWER_SETS, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()))
def test_answer_sets_bake_clean(answers, tmp_path):
    project = bake(tmp_path, **answers)
    assert_ruff_clean(project)
    train = (project / "configs" / "train.yaml").read_text()
    if "logger" in answers:
        assert f"logger: {answers['logger']}" in train
    if answers.get("project_name") == "Weather Net":
        assert project.name == "weather-net" and (project / "src" / "weather_net").is_dir()


def test_post_gen_hook_prints_next_steps(tmp_path):
    result = bake_cli(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "python train.py" in result.stdout


@pytest.mark.parametrize("cluster", CHOICES["cluster"])
def test_each_cluster_answer_renders_the_three_scripts(cluster, tmp_path):
    project = bake(tmp_path, cluster=cluster, strategy="deepspeed", slurm_account="project_462000007")
    scripts = sorted(p.name for p in (project / "scripts").glob("run-gpu*.sh"))
    assert scripts == ["run-gpu1.sh", "run-gpu4.sh", "run-gpu8.sh"]
    target = "generic" if cluster == "local" else cluster  # local has no Slurm: scripts for any Slurm cluster
    for name in scripts:
        text = (project / "scripts" / name).read_text()
        assert f"cluster={target} strategy=deepspeed" in text
        assert "#SBATCH --account=project_462000007" in text
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (tools/test.sh installs it when run as root)")
    result = subprocess.run(["shellcheck", *map(str, (project / "scripts").glob("*.sh"))], capture_output=True)
    assert result.returncode == 0, result.stdout.decode()


def test_an_empty_slurm_account_bakes_scripts_without_one(tmp_path):
    """For clusters that bill no account (Palmetto's guide asks for none): before, the answer
    had to be given, and every script asked Slurm for it."""
    project = bake(tmp_path, cluster="palmetto", slurm_account="")
    for script in (project / "scripts").glob("run-gpu*.sh"):
        assert "--account" not in script.read_text(), script
    assert "--account" not in (project / "docs" / "deepspeed.md").read_text()
    assert "/scratch/<project>/data" in (project / "README.md").read_text()
    assert_ruff_clean(project)


def test_a_cookiecutter_without_hydra_says_how_to_render_the_scripts(default_project, tmp_path):
    """cookiecutter from pipx has no hydra-core: the bake still works and names the one command
    that renders scripts/ after `pip install`; that command writes the default bake's scripts."""
    blocked = tmp_path / "no-hydra" / "hydra"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'hydra'\", name='hydra')\n")
    command = [sys.executable, "-m", "cookiecutter", str(TEMPLATE), "--no-input", "-o", str(tmp_path / "out")]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(blocked.parent)}
    )
    assert result.returncode == 0, result.stderr
    project = tmp_path / "out" / default_project.name
    assert not list((project / "scripts").glob("run-gpu*.sh"))
    render = f"python -m {default_project.name.replace('-', '_')}.slurm --write-scripts"
    assert render in result.stdout and "hydra was missing" in result.stdout
    rendered = subprocess.run(
        [sys.executable, "-m", *render.split()[2:]],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(project / "src")},
        timeout=300,
    )
    assert rendered.returncode == 0, rendered.stderr
    for script in default_project.glob("scripts/run-gpu*.sh"):
        assert (project / "scripts" / script.name).read_text() == script.read_text()
