"""tools/setup.sh installs with uv, which does not read pip's configuration: the indexes,
find-links and constraints pip is given (files and PIP_* variables) must reach uv as flags."""

import os
import subprocess
import sys

from conftest import TEMPLATE


def uv_flags(tmp_path, config: str, **env: str) -> list[tuple[str, str]]:
    (tmp_path / "pip.conf").write_text(config)
    environ = os.environ | {"PIP_CONFIG_FILE": str(tmp_path / "pip.conf")} | env
    printed = subprocess.run(
        [sys.executable, TEMPLATE / "tools" / "pip_index_flags.py"],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    return list(zip(printed[::2], printed[1::2], strict=True))


def test_pip_indexes_files_and_variables_become_uv_flags(tmp_path):
    config = (
        "[global]\n"
        "index-url = https://mirror.example.org/simple\n"
        "extra-index-url =\n    file:///opt/a/simple\n    file:///opt/b/simple\n"
        "constraint = /etc/site-constraints.txt\n"
        "timeout = 60\n"
    )
    flags = uv_flags(tmp_path, config, PIP_FIND_LINKS="/opt/wheels")
    for wanted in [
        ("--index-url", "https://mirror.example.org/simple"),
        ("--extra-index-url", "file:///opt/a/simple"),
        ("--extra-index-url", "file:///opt/b/simple"),
        ("--constraint", "/etc/site-constraints.txt"),
        ("--find-links", "/opt/wheels"),
    ]:
        assert wanted in flags
    assert all(flag != "--timeout" and value != "60" for flag, value in flags)  # not an index setting
    assert len(flags) == len(set(flags))  # a place set in a file and a variable is passed once
