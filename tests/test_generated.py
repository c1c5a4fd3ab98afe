"""The default bake's own test suite passes (it trains for real: DDP, resume, ...)."""

import os
import subprocess
import sys


def test_generated_tests_pass(default_project):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-ra"],
        cwd=default_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    print(result.stdout[-20000:], result.stderr[-5000:])
    assert result.returncode == 0, f"generated tests failed:\n{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
