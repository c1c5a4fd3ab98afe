"""Fixtures shared by the Slurm tests: a real local Slurm, and shellcheck."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.slurm_helpers import LocalSlurm

SLURM_SCRIPTS = Path(__file__).parent / "slurm"


def _install_with_apt(package: str) -> str | None:
    """Install a Debian package when we may; return why not otherwise."""
    if os.geteuid() != 0:
        return f"{package} is not installed, and installing it needs root"
    if shutil.which("apt-get") is None:
        return f"{package} is not installed, and there is no apt-get here"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", package]):
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            return f"`{' '.join(command)}` failed: {result.stderr.strip()[-300:]}"
    return None


def pytest_collection_modifyitems(items):
    """Every test that uses the local Slurm is marked slurm and slow: `-m "not slurm"` and
    `-m "not slow"` start no Slurm (the sweeps' Slurm tests lacked both marks)."""
    for item in items:
        if "local_slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def shellcheck() -> str:
    if shutil.which("shellcheck") is None:
        reason = _install_with_apt("shellcheck")
        if reason:
            pytest.skip(reason)
    return shutil.which("shellcheck")


@pytest.fixture(scope="session")
def local_slurm(request):
    """A 2-node Slurm on this machine, started once for the session (needs root; installs slurm-wlm)."""
    if os.geteuid() != 0:
        pytest.skip("starting a local Slurm needs root (CI runs as root)")
    installed = shutil.which("sbatch") is not None
    if not installed and shutil.which("apt-get") is None:
        pytest.skip("Slurm is not installed and there is no apt-get to install it")
    # Not under pytest's tmp_path: munged refuses a socket below a directory that is not world-executable.
    directory = Path(tempfile.mkdtemp(prefix="local-slurm-"))
    env = {
        **os.environ,
        "LOCAL_SLURM_DIR": str(directory),
        # Large enough for every profile's whole-node scripts to pass `sbatch --test-only`
        # (LUMI: 56 CPUs and 480 GB; Mahti under torchrun: 128 CPUs). Nothing is reserved.
        "LOCAL_SLURM_CPUS_PER_NODE": "128",
        "LOCAL_SLURM_GPUS_PER_NODE": "8",
        "LOCAL_SLURM_MEM_MB": "600000",
    }
    started = subprocess.run(
        ["bash", str(SLURM_SCRIPTS / "start-local-slurm.sh")], env=env, capture_output=True, text=True, timeout=900
    )
    if started.returncode != 0:
        message = f"start-local-slurm.sh failed:\n{started.stderr[-3000:]}"
        if not installed:  # no network to the Debian mirror, most likely
            pytest.skip(message)
        pytest.fail(message)
    try:
        yield LocalSlurm(conf=directory / "etc" / "slurm.conf", partition="gpu")
    finally:
        if request.session.testsfailed:  # Slurm's side of a failure: its logs outlive the cluster
            kept = Path(tempfile.mkdtemp(prefix="local-slurm-logs-"))
            shutil.copytree(directory / "log", kept, dirs_exist_ok=True)
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"\nA test failed: Slurm's logs are kept in {kept}")
        stop = ["bash", str(SLURM_SCRIPTS / "stop-local-slurm.sh"), "--purge"]
        subprocess.run(stop, env=env, capture_output=True, timeout=300)
