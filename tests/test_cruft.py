"""Upgrades after the bake: a project made with `cruft create` takes a later change of the
template with `cruft update`, and keeps its own work. Offline: the template is a local git copy."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import TEMPLATE

# Git needs a name for the commits the test makes; nothing else of the site's config changes.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Template Tests",
    "GIT_AUTHOR_EMAIL": "tests@example.org",
    "GIT_COMMITTER_NAME": "Template Tests",
    "GIT_COMMITTER_EMAIL": "tests@example.org",
}
# The bake's own tests must not inherit this pytest's options.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | GIT_ENV


def run(*command: str | Path, cwd: Path, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == expect, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def cruft(*args: str | Path, cwd: Path, expect: int = 0) -> subprocess.CompletedProcess:
    return run(sys.executable, "-m", "cruft", *args, cwd=cwd, expect=expect)


def commit_all(repo: Path, message: str) -> None:
    run("git", "add", "-A", cwd=repo)
    run("git", "commit", "-q", "--no-gpg-sign", "-m", message, cwd=repo)


def template_repo(path: Path) -> Path:
    """A git repository of the template as a user's clone has it: tracked and new, unignored files."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=TEMPLATE).stdout
    for name in filter(None, listed.split("\0")):
        if (TEMPLATE / name).is_file():  # a file deleted but not yet committed is listed too
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TEMPLATE / name, path / name)
    run("git", "init", "-q", "-b", "main", cwd=path)
    commit_all(path, "template")
    return path


def test_cruft_update_brings_a_template_change_and_keeps_the_projects_work(tmp_path):
    template = template_repo(tmp_path / "template")
    answers = '{"cluster": "puhti"}'
    cruft("create", "--no-input", "--output-dir", tmp_path / "out", "--extra-context", answers, template, cwd=tmp_path)
    project = tmp_path / "out" / "mnist-ddp"
    assert (project / ".cruft.json").is_file()
    run("git", "init", "-q", "-b", "main", cwd=project)
    commit_all(project, "baked")

    # The project's own work: a new config and an edit at the end of a template file.
    (project / "configs" / "model" / "mine.yaml").write_text("# my model\n")
    readme = project / "README.md"
    readme.write_text(readme.read_text() + "\n## Our notes\n\nKept across upgrades.\n")
    commit_all(project, "our work")

    # Later, the template changes: a line near the top of the README, and a new file that
    # uses the answers (rendered with the project's own answers on update).
    template_readme = template / "{{cookiecutter.project_slug}}" / "README.md"
    lines = template_readme.read_text().splitlines(keepends=True)
    template_readme.write_text("".join(lines[:2] + ["Upgraded from the template.\n"] + lines[2:]))
    (template / "{{cookiecutter.project_slug}}" / "UPGRADED.md").write_text(
        "{{ cookiecutter.package_name }} on {{ cookiecutter.cluster }}\n"
    )
    commit_all(template, "a fix for every bake")

    assert cruft("check", cwd=project, expect=1).returncode == 1  # it sees the new commit
    cruft("update", "--skip-apply-ask", cwd=project)

    assert (project / "UPGRADED.md").read_text() == "mnist_ddp on puhti\n"
    text = readme.read_text()
    assert "Upgraded from the template.\n" in text and text.endswith("Kept across upgrades.\n")
    assert (project / "configs" / "model" / "mine.yaml").read_text() == "# my model\n"
    assert not list(project.rglob("*.rej")), "a change did not apply"
    cruft("check", cwd=project)
    # The upgraded project still works: its config tests, a small subset of its suite.
    run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_configs.py", cwd=project)


def test_cruft_create_refuses_a_wrong_answer_or_key_with_one_line(tmp_path):
    """The README recommends `cruft create`: a wrong answer gave a rich traceback there (the one
    line was the cookiecutter command's), and a misspelled key was dropped without a word."""
    template = template_repo(tmp_path / "template")
    for answers, line in [
        ('{"cluster": "puhtii"}', "Error: cluster='puhtii': not one of local, puhti, mahti"),
        ('{"clustr": "puhti"}', "Error: clustr='puhti': not an answer of this template. Fix: cluster=puhti"),
    ]:
        out = tmp_path / "out"
        made = cruft(
            "create", "--no-input", "--output-dir", out, "--extra-context", answers, template, cwd=tmp_path, expect=1
        )
        output = (made.stdout + made.stderr).strip()
        assert output.startswith(line) and len(output.splitlines()) == 1, output
        assert not out.exists()
