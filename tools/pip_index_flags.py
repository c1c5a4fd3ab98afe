"""Print pip's index settings (pip.conf files and PIP_* variables) as uv flags, one per line.

uv installs the venv in a third of pip's time but does not read pip's configuration; a machine
whose pip finds torch on a local index or in a wheel folder must give uv the same places.
"""

import ast
import subprocess
import sys

UV_FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}

listed = subprocess.run(
    [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
).stdout
flags: list[tuple[str, str]] = []
for line in listed.splitlines():  # key=repr(value), e.g. global.extra-index-url='\nfile:///a\nfile:///b'
    key, _, quoted = line.partition("=")
    flag = UV_FLAGS.get(key.rpartition(".")[2])
    if not flag:
        continue
    for value in ast.literal_eval(quoted).split():  # a list is whitespace-separated
        if (flag, value) not in flags:
            flags.append((flag, value))
for flag, value in flags:
    print(flag)
    print(value)
