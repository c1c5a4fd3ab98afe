"""Every wrong answer stops the bake with one line (answer, value, what is allowed, the fix),
exit status 1, no traceback and nothing written; unusual but valid answers bake a project
that parses, builds its metadata and passes ruff."""

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml
from conftest import CHOICES, TEMPLATE, bake, bake_cli
from cookiecutter.exceptions import FailedHookException
from test_bake import assert_ruff_clean

from local_extensions import (
    MAX_NAME,
    PACKAGE,
    TAKEN_DISTRIBUTIONS,
    TAKEN_NAMES,
    distribution_name,
    py_docstring,
    py_string,
    toml_string,
    yaml_string,
)

LONG = "a_very_long_package_name_ab_cde"  # MAX_NAME + 1 characters

# (answers as on the command line, what the one line must say)
BAD_ANSWERS = [
    (["cluster=foo"], "cluster='foo': not one of local, puhti, mahti, lumi, palmetto, narvi, generic"),
    (["cluster=lumii"], "Fix: cluster=lumi"),
    (
        ["cluster=PUHTI"],
        "cluster='PUHTI': not one of local, puhti, mahti, lumi, palmetto, narvi, generic. Fix: cluster=puhti",
    ),
    (["clustr=lumi"], "clustr='lumi': not an answer of this template. Fix: cluster=lumi"),
    (["author_name=Jane Doe"], "author_name='Jane Doe': not an answer of this template. Fix: 'author=Jane Doe'"),
    (["_choices=x"], "_choices='x': not an answer of this template"),
    (["strategy=ddp2"], "strategy='ddp2': not one of ddp, deepspeed, horovod, fsdp"),
    (["logger=mlflow"], "logger='mlflow': not one of tensorboard, csv, wandb"),
    (["license=GPL"], "license='GPL': not one of MIT, BSD-3-Clause, Apache-2.0, none"),
    (["package_name=class"], "package_name='class': is a Python keyword"),
    (["package_name=my-pkg"], "package_name='my-pkg': not an import name"),
    (["package_name=Mnist"], "package_name='Mnist': not an import name"),
    (["package_name=2048_game"], "Fix: package_name=my_2048_game"),
    (["project_name=2048 Game"], "package_name='2048_game': not an import name"),
    ([f"package_name={LONG}"], f"is {MAX_NAME + 1} characters, at most {MAX_NAME} fit"),
    (["package_name=torch"], "package_name='torch': would shadow a module the project needs"),
    (["package_name=numpy"], "package_name='numpy': would shadow a module the project needs"),
    (["package_name=rich"], "package_name='rich': would shadow a module the project needs"),
    (["package_name=torchmetrics"], "package_name='torchmetrics': would shadow a module"),
    (["package_name=yaml"], "package_name='yaml': would shadow a module the project needs"),
    (["package_name=markupsafe"], "package_name='markupsafe': would shadow a module the project needs"),
    (["package_name=torchgen"], "package_name='torchgen': would shadow a module the project needs"),
    (["package_name=torch_xla"], "package_name='torch_xla': would shadow a module the project needs"),  # probed for
    (["package_name=scipy"], "package_name='scipy': would shadow a module the project needs"),  # probed for
    (["package_name=matplotlib"], "package_name='matplotlib': would shadow a module the project needs"),  # probed for
    (["package_name=regex"], "package_name='regex': would shadow a module the project needs"),  # probed for
    (["package_name=tests"], "package_name='tests': would shadow a module the project needs"),
    (["package_name=json"], "package_name='json': would shadow that standard library module"),
    (["package_name=typing"], "package_name='typing': would shadow that standard library module"),
    (["project_slug=My Project"], "project_slug='My Project': use lowercase ASCII letters"),
    (["project_slug=ac/dc"], "project_slug='ac/dc': use lowercase ASCII letters"),
    (["project_slug=net-"], "Fix: project_slug=net"),
    ([f"project_slug={LONG.replace('_', '-')}"], f"at most {MAX_NAME} fit"),
    # pip install -e . would uninstall the dependency of that name (pip's names: _ and . are -)
    (["project_slug=torch", "package_name=my_torch"], "project_slug='torch': is the name of a package the project"),
    (["project_slug=pytorch_lightning", "package_name=pl_net"], "Fix: project_slug=my-pytorch_lightning"),
    (["project_slug=numpy", "package_name=my_numpy"], "project_slug='numpy': is the name of a package the project"),
    (["project_slug=pip", "package_name=my_pip"], "`pip install -e .` would uninstall it"),
    (["project_slug=yarl", "package_name=my_yarl"], "project_slug='yarl': is the name of a package the project"),
    (["package_name=yarl"], "package_name='yarl'"),  # aiohttp's: with it shadowed, aiohttp fails to import
    # baked, but the environment's pip was imported instead ("No module named 'pip.launch'")
    (["package_name=pip"], "package_name='pip': is pip's own name: installed in every environment, it is found befo"),
    (["package_name=sitecustomize"], "package_name='sitecustomize': is a module Python imports at every start, for "),
    (["project_name="], "project_name='': is empty"),
    (["project_name=🚀"], "project_slug='': use lowercase ASCII letters"),
    (["author="], "author='': is empty"),
    (["author=Ann\nSmith"], "author='Ann\\nSmith': holds a line break or control character at position 3"),
    (["description=line one\nline two"], "description='line one\\nline two': holds a line break"),
    (["description=tab\there"], "holds a line break or control character at position 3"),
    (["project_name=  My Project "], "project_name='  My Project ': begins or ends with spaces. Fix: 'project_name=My"),
    (["author=Ann Smith "], "author='Ann Smith ': begins or ends with spaces. Fix: 'author=Ann Smith'"),
    (["email= ann@example.org"], "email=' ann@example.org': begins or ends with spaces. Fix: email=ann@example.org"),
    (["slurm_account=project_1 "], "slurm_account='project_1 ': begins or ends with spaces. Fix: slurm_account=proj"),
    (["email=not-an-email"], "email='not-an-email': not an address such as you@example.org"),
    (["email=ann@localhost"], "email='ann@localhost': not an address"),
    (["email=Ann <ann@example.org>"], "email='Ann <ann@example.org>': not an address"),
    (["email=ann@example.org, bob@example.org"], "not an address"),
    (["email=.ann.@example.org"], "email='.ann.@example.org': not an address"),  # packaging refuses it
    (["email=a..b@example.org"], "email='a..b@example.org': not an address"),
    # A Latin-1 terminal's "Zoë": the byte 0xEB, which Python holds as a surrogate
    (["author=Zo\udceb"], "author='Zo\\udceb': holds a byte at position 2 that is not UTF-8 text"),
    (["project_name=Caf\udce9 Net"], "project_name='Caf\\udce9 Net': holds a byte at position 3 that is not"),
    (["slurm_account=project 2001234"], "slurm_account='project 2001234': a Slurm account has letters"),
    (["slurm_account=$(rm -rf ~)"], "slurm_account='$(rm -rf ~)': a Slurm account has letters"),
    (["slurm_account=null"], "slurm_account='null': would be the account's name (#SBATCH --account=null). Fix: slur"),
    (["slurm_account=None"], "slurm_account='None': would be the account's name"),  # meant as none; sbatch refused it
    (["slurm_account= "], "slurm_account=' ': begins or ends with spaces"),  # '' is taken: no --account
    (["python_version=2.7"], "python_version='2.7': supported are 3.10, 3.11, 3.12, 3.13"),
    (["python_version=3.9"], "python_version='3.9': supported are 3.10"),
    (["description={% bad"], "the answer '{% bad' is not valid Jinja"),
    (["description={{ x }}"], "the answer '{{ x }}' uses x, which cookiecutter cannot fill"),
    # Jinja that parses but fails when rendered, or drops text: before, a traceback or a context dump
    (["description={{ cookiecutter.nope }}"], "an answer uses cookiecutter.nope, which has no value then"),
    (["project_name={{ cookiecutter.project_slug }}"], "an answer uses cookiecutter.project_slug, which has no value"),
    (["description={{ 1/0 }}"], "the answer '{{ 1/0 }}' holds a Jinja div"),
    (["description=a {# note #} b"], "the answer 'a {# note #} b' holds {#, which Jinja reads as the start of"),
    (["description=C{#}"], "Fix: leave {{, {% and {# out of answers (cookiecutter and cruft read them as Jinja)"),
    # Escaped, it bakes, but cruft renders the stored answers again at every update: it could never update
    (["description=Maps {{ '{{' }}x}} to y"], "description='Maps {{x}} to y': holds {{, {% or {#, which cruft"),
]


def test_a_config_files_misspelt_answer_is_refused(tmp_path):
    """cookiecutter dropped it without a word and baked the default account."""
    config = tmp_path / "config.yaml"
    others = "  full_name: Ann\n  authors: Ann\n  python_versions: x\n"  # other templates' answers: taken
    config.write_text(f'default_context:\n  slurm_acount: "project_9"\n{others}')
    result = bake_cli(tmp_path / "out", "--config-file", str(config))
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1 and len(output.splitlines()) == 1, output
    expected = f"Error: slurm_acount='project_9': not an answer of this template ({config}). Fix: spell it"
    assert output == f"{expected} slurm_account there"
    assert not (tmp_path / "out").exists()
    config.write_text(f"default_context:\n{others}")
    assert bake_cli(tmp_path / "out", "--config-file", str(config)).returncode == 0


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ("slurm_account: 0123", "Error: slurm_account=83: "),  # YAML 1.1's octal
        ("python_version: 3.10", "Error: python_version=3.1: "),
        ("slurm_account: no", "Error: slurm_account=False: "),
    ],
)
def test_a_config_files_answer_that_yaml_reads_as_no_text_is_refused(given, line, tmp_path):
    """cookiecutter made text of them after YAML had read them: 0123 baked as account 83, silently."""
    config = tmp_path / "config.yaml"
    config.write_text(f"default_context:\n  {given}\n  full_name: Ann  # another template's answer: taken\n")
    result = bake_cli(tmp_path / "out", "--config-file", str(config))
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1 and output.startswith(line) and len(output.splitlines()) == 1, output
    assert "gives it as a YAML" in output and "Fix: quote it there: " in output, output
    assert not (tmp_path / "out").exists()
    key, _, value = given.partition(": ")
    config.write_text(f'default_context:\n  {key}: "{value}"\n')  # quoted: the text as typed
    assert bake_cli(tmp_path / "out", "--config-file", str(config)).returncode == 0


def test_answers_may_use_earlier_answers_through_the_templates_filters(tmp_path):
    project = bake(
        tmp_path,
        description="{{ cookiecutter.project_name | upper }}, {braces} [brackets]",
        package_name="{{ cookiecutter.project_slug | package_name }}x",
    )
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["description"] == "MNIST DDP, {braces} [brackets]"
    assert (project / "src" / "mnist_ddpx").is_dir()


@pytest.mark.parametrize("answers, line", BAD_ANSWERS, ids=[" ".join(a)[:40] for a, _ in BAD_ANSWERS])
def test_bad_answer_is_one_line_and_leaves_nothing(answers, line, tmp_path):
    result = bake_cli(tmp_path, *answers)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1, output
    assert "Traceback" not in output, output
    assert len(output.splitlines()) == 1, output
    assert output.startswith("Error: ") and "Fix: " in output, output
    assert line in output, output
    assert list(tmp_path.iterdir()) == [], "a half-made project was left behind"


def test_baking_over_an_existing_project_is_one_line_and_changes_nothing(tmp_path):
    project = bake(tmp_path)
    (project / "train.py").write_text("# my work\n")
    result = bake_cli(tmp_path)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1 and len(output.splitlines()) == 1 and "already exists" in output, output
    assert (project / "train.py").read_text() == "# my work\n"


def test_bad_answer_through_the_python_api_raises_before_any_file(tmp_path):
    with pytest.raises(FailedHookException, match="cluster='foo'"):
        bake(tmp_path, cluster="foo")
    assert list(tmp_path.iterdir()) == []


def test_prompts_list_the_choices():
    context = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    for key, allowed in CHOICES.items():
        assert context[key] == allowed[0], key  # the default is the first choice
        prompt = context["__prompts__"][key]
        assert all(choice in prompt for choice in allowed), (key, prompt)


def test_a_smoke_run_loads_only_names_a_package_may_not_take(default_project):
    """What the generated code's imports import in turn (markupsafe, attr, torchgen: a package of
    that name broke the bake's hook or the first run), found by running it: a smoke run, and
    the Slurm renderer that the post-gen hook imports."""
    package = default_project.name.replace("-", "_")
    script = (
        "import json, runpy, sys\n"
        "sys.argv = ['train.py', 'experiment=smoke', 'trainer.accelerator=cpu', 'output_root=' + sys.argv[1]]\n"
        "try:\n    runpy.run_path('train.py', run_name='__main__')\n"
        "except SystemExit as stopped:\n    assert not stopped.code, stopped.code\n"
        f"import {package}.slurm.render\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(default_project / "src")}
    run = subprocess.run(
        [sys.executable, "-c", script, str(default_project / "outputs-smoke")],
        cwd=default_project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    loaded = set(json.loads(run.stdout.splitlines()[-1]))
    could_be_named = {name for name in loaded if PACKAGE.fullmatch(name)} - set(sys.stdlib_module_names)
    missing = could_be_named - TAKEN_NAMES - {package}
    assert not missing, f"add to TAKEN_NAMES in local_extensions.py: {sorted(missing)}"


def test_generated_code_imports_only_names_a_package_may_not_take(default_project):
    """TAKEN_NAMES must hold every module the generated code imports (else a package could shadow it)."""
    imported = set()
    for path in default_project.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    missing = imported - set(sys.stdlib_module_names) - TAKEN_NAMES - {"mnist_ddp"}
    assert not missing, f"add to TAKEN_NAMES in local_extensions.py: {sorted(missing)}"


def test_the_distributions_the_project_installs_are_names_a_slug_may_not_take(default_project):
    """project_slug is the project's distribution name: `pip install -e .` of a project called
    numpy or pip uninstalls that package. Every distribution that the dependencies and extras
    require in turn (as installed here, for this platform) must be in TAKEN_DISTRIBUTIONS."""
    from packaging.requirements import Requirement

    project = tomllib.loads((default_project / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    required, todo = set(), [Requirement(each) for each in wanted]
    while todo:
        requirement = todo.pop()
        name = distribution_name(requirement.name)
        if name in required:
            continue
        required.add(name)
        try:
            requires = importlib.metadata.distribution(requirement.name).requires or []
        except importlib.metadata.PackageNotFoundError:  # an extra not installed here (deepspeed)
            continue
        for each in map(Requirement, requires):
            if each.marker is None or any(each.marker.evaluate({"extra": e}) for e in requirement.extras or {""}):
                todo.append(each)
    assert {"torch", "numpy", "markupsafe", "pyyaml"} <= required, "the walk no longer finds the known ones"
    missing = required - TAKEN_DISTRIBUTIONS
    assert not missing, f"add to TAKEN_DISTRIBUTIONS in local_extensions.py: {sorted(missing)}"


# The libraries a training run goes through, and how they ask whether a module is installed before
# they import it: RequirementCache("torch_xla>=2.1", module="..."), module_available("scipy"),
# find_spec("matplotlib"), import_module("halide"), ..., or `try: import x` / `except ImportError`.
PROBING = [
    "pytorch_lightning", "lightning_fabric", "lightning_utilities", "torchmetrics", "torch", "torchvision",
    "hydra", "hydra_plugins", "omegaconf", "tensorboard", "rich", "submitit",
]  # fmt: skip
PROBES = ("RequirementCache", "module_available", "package_available", "find_spec", "_check_module_exists",
          "compare_version", "import_module", "__import__")  # fmt: skip
PROBE_CALL = re.compile(
    rf"\b(?:{'|'.join(PROBES)})\(\s*(?:module=)?[\"']([\w.-]+)[^\"'\n]*[\"'](?:,\s*(?:module=)?[\"']([\w.]+))?"
)
TRY_IMPORT = re.compile(  # a try: block's lines (indented deeper), then `except ...ImportError`
    r"^(?P<indent>[ \t]*)try:[^\n]*\n(?P<body>(?:(?P=indent)[ \t]+\S[^\n]*\n|[ \t]*\n)+)"
    r"(?P=indent)except\b[^\n]*\b(?:ImportError|ModuleNotFoundError)\b",
    re.M,
)
IMPORT = re.compile(r"^[ \t]+(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w. \t,]+))", re.M)


def probed_modules(source):
    """The modules a library's source asks for by name, without needing them: top-level names."""
    names = []
    if any(probe in source for probe in PROBES):
        for match in PROBE_CALL.finditer(source):
            line = source[source.rfind("\n", 0, match.start()) + 1 : match.start()].lstrip()
            if not line.startswith((">>>", "...", "#")):  # not a doctest's made-up name ('bla') or a comment
                names += [name for name in match.groups() if name]
    if "ImportError" in source or "ModuleNotFoundError" in source:
        for block in TRY_IMPORT.finditer(source):
            for found in IMPORT.finditer(block["body"]):
                names += [found[1]] if found[1] else [part.split()[0] for part in found[2].split(",") if part.strip()]
    return {re.split(r"[.<>=!~\[; ]", name)[0] for name in names}  # "torch_xla>=2.1" -> torch_xla


def test_modules_the_libraries_probe_for_are_names_a_package_may_not_take():
    """Lightning, torchmetrics, torch, ... import a module once they find it installed: a package
    named torch_xla, scipy or matplotlib baked, then the first run imported it as the library
    ("No module named 'torch_xla.experimental'"). Their sources as installed, not run."""
    probed = set()
    for library in PROBING:
        spec = importlib.util.find_spec(library)
        assert spec is not None and spec.submodule_search_locations, f"{library} is not installed"
        for folder in spec.submodule_search_locations:
            for path in Path(folder).rglob("*.py"):
                if not {"testing", "tests"} & set(path.relative_to(folder).parts):  # their own test helpers
                    probed |= probed_modules(path.read_text(encoding="utf-8", errors="replace"))
    assert {"torch_xla", "scipy", "matplotlib", "regex"} <= probed, "the scan no longer finds the known probes"
    could_be_named = {name for name in probed if PACKAGE.fullmatch(name)} - set(sys.stdlib_module_names)
    missing = could_be_named - TAKEN_NAMES
    assert not missing, f"add to TAKEN_NAMES in local_extensions.py: {sorted(missing)}"


NASTY = [
    'Zoë "Zed" O\'Brien',
    "C:\\Users\\me\\",
    'says """ twice """',
    "\\",
    '"',
    "日本語 and 🚀",
    "{braces} [brackets] # hash: colon",
    "x" * 150,
]


@pytest.mark.parametrize("text", NASTY)
def test_filters_round_trip(text):
    assert tomllib.loads(f"key = {toml_string(text)}")["key"] == text
    assert yaml.safe_load(f"key: {yaml_string(text)}")["key"] == text
    assert ast.literal_eval(py_string(text)) == text
    docstring = ast.get_docstring(ast.parse(f'"""{py_docstring(text)}\n"""\n'), clean=False)
    assert "".join(docstring.split()) == "".join(text.split())  # only whitespace changes
    assert all(len(line) <= 100 for line in py_docstring(text).splitlines())


@pytest.mark.parametrize("account", ["no", "off", "yes", "on", "null", "false", "0", "0123", "0x1F", "1e3"])
def test_slurm_account_stays_text_in_yaml(account):
    assert yaml.safe_load(f"account: {yaml_string(account)}")["account"] == account


UNUSUAL = {
    "project_name": ('Ünïcödé "Quoted" Net\'s 日本語 ' + "long " * 20)[:120],  # the slug is cut
    "author": 'Zoë "Zed" O\'Brien \\ C:\\Users\\me',
    "description": 'Says """ and C:\\Users\\me\\ and a backslash at the end \\',
    "email": "zoe.o'brien+ml@example.org",
    "slurm_account": "0123",
    "logger": "wandb",
    "license": "Apache-2.0",
}


def test_unusual_answers_bake_a_working_project(tmp_path):
    assert len(UNUSUAL["project_name"]) == 120
    result = bake_cli(tmp_path, *(f"{k}={v}" for k, v in UNUSUAL.items()))
    assert result.returncode == 0, result.stdout + result.stderr
    (project,) = tmp_path.iterdir()
    assert project.name == "unicode-quoted-net-s-ri-ben-yu" and len(project.name) <= MAX_NAME
    assert "pip install -e '.[dev,wandb]'" in result.stdout  # the default logger gets installed
    assert "pip install -e '.[dev,wandb]'" in (project / "README.md").read_text()
    assert_ruff_clean(project)

    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["authors"] == [{"name": UNUSUAL["author"], "email": UNUSUAL["email"]}]
    assert meta["description"] == UNUSUAL["description"]
    # setuptools turns it into package metadata (what pip install would do first)
    build = "from setuptools import build_meta; print(build_meta.prepare_metadata_for_build_wheel('.'))"
    made = subprocess.run([sys.executable, "-c", build], cwd=project, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    metadata = (project / made.stdout.split()[-1] / "METADATA").read_text()
    assert f"Summary: {UNUSUAL['description']}\n" in metadata

    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in (project / "LICENSE").read_text()
    assert "#SBATCH --account=0123" in (project / "scripts" / "run-gpu1.sh").read_text()
    assert "multirun/" in (project / ".gitignore").read_text().splitlines()
    # the project's own test of the #SBATCH header, with this account
    header = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_slurm_render.py", "-k", "header"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert header.returncode == 0, header.stdout[-3000:]


@pytest.mark.parametrize(
    "answers, slug, package",
    [
        ({"project_name": "AC/DC"}, "ac-dc", "ac_dc"),
        ({"project_name": "net_"}, "net", "net"),
        ({"project_name": "Q", "email": ""}, "q", "q"),  # short names: ruff format must not join lines
        ({"package_name": LONG[:MAX_NAME], "project_slug": LONG[:MAX_NAME].replace("_", "-")}, None, None),
        ({"project_name": "No"}, "no", "no"),  # YAML 1.1 reads a bare no as false
        ({"project_slug": "1e3", "package_name": "thousand"}, "1e3", "thousand"),  # ... and 1e3 as a number
    ],
    ids=["slash", "underscore", "one-letter-no-email", "longest", "yaml-false", "yaml-number"],
)
def test_unusual_names_bake_clean(answers, slug, package, tmp_path):
    project = bake(tmp_path, **answers)
    slug = slug or answers["project_slug"]
    assert project.name == slug and (project / "src" / (package or answers["package_name"])).is_dir()
    assert_ruff_clean(project)
    tomllib.loads((project / "pyproject.toml").read_text())
    # Slurm sweeps name their jobs by the slug (submitit wants a string: `name: no` failed)
    launcher = yaml.safe_load((project / "configs" / "hydra" / "launcher" / "slurm.yaml").read_text())
    assert launcher["name"] == slug
