"""Reject bad cookiecutter answers before any file is written.

Each problem is reported on one line; exiting non-zero makes cookiecutter delete the
half-made project directory.
"""

import json
import keyword
import re
import sys

ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")

SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# Package names that would shadow a library the generated project imports.
SHADOWED = {
    "torch",
    "torchvision",
    "lightning",
    "pytorch_lightning",
    "hydra",
    "omegaconf",
    "deepspeed",
    "horovod",
    "tests",
    "test",
    "src",
    "train",
}


def problems(answers):
    slug = answers["project_slug"]
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", slug):
        yield (
            f"project_slug {slug!r}: use lowercase letters, digits, '-' or '_', "
            "starting with a letter (e.g. 'mnist-ddp')"
        )

    package = answers["package_name"]
    if not package.isidentifier() or not re.fullmatch(r"[a-z_][a-z0-9_]*", package):
        yield (f"package_name {package!r}: not a valid lowercase Python identifier (e.g. 'mnist_ddp')")
    elif keyword.iskeyword(package):
        yield f"package_name {package!r}: is a Python keyword; pick another name"
    elif package in SHADOWED:
        yield f"package_name {package!r}: would shadow the library of that name; pick another"

    account = answers["slurm_account"]
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", account):
        yield (
            f"slurm_account {account!r}: expected a Slurm account such as "
            "'project_2001234' (letters, digits, '_', '.', '-')"
        )

    version = answers["python_version"]
    if version not in SUPPORTED_PYTHONS:
        yield (f"python_version {version!r}: supported are {', '.join(SUPPORTED_PYTHONS)}")


def main():
    found = list(problems(ANSWERS))
    for line in found:
        print(f"ERROR: {line}", file=sys.stderr)
    if found:
        sys.exit(1)


if __name__ == "__main__":
    main()
