"""Slurm: cluster profiles (configs/cluster/*.yaml) rendered into sbatch scripts.

    python -m {{ cookiecutter.package_name }}.slurm cluster=lumi strategy=deepspeed nodes=2   # print the script
    python -m {{ cookiecutter.package_name }}.slurm --write-scripts                           # re-render scripts/

The profiles are read with Hydra's compose API, as train.py reads them; the script's text is
job.sh.j2 (Jinja2). No torch: cookiecutter's post-generation hook renders scripts/ with this
code when the Python that runs cookiecutter has hydra-core.
"""
