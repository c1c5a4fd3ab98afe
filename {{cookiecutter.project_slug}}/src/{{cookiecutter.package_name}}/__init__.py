"""{{ (cookiecutter.project_name ~ ": " ~ cookiecutter.description) | py_docstring }}

Importing the package is cheap on purpose (no torch): `python train.py --help` stays fast.
"""

__version__ = "0.1.0"
