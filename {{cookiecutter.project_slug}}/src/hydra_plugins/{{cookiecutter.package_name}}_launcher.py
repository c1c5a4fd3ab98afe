"""Hydra takes its launchers from the `hydra_plugins` package alone (and imports this module at
every start): here the sweep launchers of configs/hydra/launcher/ get their names there. Their
code is in {{ cookiecutter.package_name }}/launch/local_sweep.py and {{ cookiecutter.package_name }}/slurm/launcher.py."""

from {{ cookiecutter.package_name }}.launch import local_sweep
from {{ cookiecutter.package_name }}.slurm import launcher


class LocalSweepLauncher(local_sweep.LocalSweepLauncher):
    """Hydra's basic launcher (the points one after another, here), with honest ends."""


class SlurmSweepLauncher(launcher.SlurmSweepLauncher):
    """Hydra's submitit launcher for Slurm, with honest ends."""
