"""Every bad argument of the sbatch renderer (`python -m {{ cookiecutter.package_name }}.slurm`) stops it with
exit code 2 and one line that names the key and the value, before any script is written;
profile values that reach a shell line run nothing."""

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.slurm.__main__ import main as slurm_main
from {{ cookiecutter.package_name }}.slurm.arguments import main as script_check
from {{ cookiecutter.package_name }}.slurm.profiles import ProfileError, load
from {{ cookiecutter.package_name }}.slurm.render import Job
from {{ cookiecutter.package_name }}.slurm.render import render as render_script

from tests.helpers import PROJECT, project_env

# (arguments, words the one line must hold)
BAD_INPUTS = [
    (["cluster=puhti", "nodes=0"], "nodes=0"),
    (["cluster=puhti", "nodes=-3"], "nodes=-3"),
    (["cluster=puhti", "nodes=abc"], "nodes=abc"),
    (["cluster=puhti", "nodes=2_0"], "nodes=2_0: a whole number from 1, e.g. nodes=2"),  # Python's 20
    # the script named cluster=mypuhti: "no such choice of cluster"
    (["cluster=puhti", "cluster.name=mypuhti"], "cluster.name=mypuhti: a profile's name is its file's, which the scr"),
    (["cluster=puhti", "gpus=-1"], "gpus=-1"),
    (["cluster=puhti", "gpus=0"], "gpus=0"),
    (["cluster=puhti", "gpus=foo"], "gpus=foo: a whole number from 1, or all (every GPU of a node)"),
    (["cluster=puhti", "gpus=8"], "gpus=8"),
    (["cluster=puhti", "test=maybe"], "test=maybe"),
    (["cluster=narvi", "test=true"], "test=true: cluster=narvi has no test partition"),
    (["cluster=puhti", "launcher=horovodrun", "strategy=ddp"], "launcher=horovodrun"),
    (["cluster=puhti", "launcher=mpirun"], "launcher=mpirun"),
    (["cluster=puhti", "strategy=horovod", "launcher=torchrun"], "strategy=horovod"),
    (["cluster=puhti", "strategy=nope"], "strategy=nope"),
    (["cluster=nowhere"], "cluster=nowhere"),
    (["cluster=puthi"], "choose one of: generic, local, lumi, mahti, narvi, palmetto, puhti. Fix: cluster=puhti"),
    (["cluster=local"], "cluster=local has no Slurm"),
    (["cluster=puhti", "nodes"], "'nodes'"),
    (["cluster=puhti", "colour=red"], "'colour=red'"),
    (["cluster=puhti", "--colour"], "--colour"),
    (["cluster=puhti", "cluster.devices=abc"], "cluster.devices=abc"),
    (["cluster=puhti", "cluster.devices=0"], "cluster.devices=0"),
    (["cluster=puhti", "cluster.slurm.gpus=foo"], "cluster.slurm.gpus=foo"),
    (["cluster=puhti", "cluster.slurm.mem_per_gpu=lots", "gpus=1"], "cluster.slurm.mem_per_gpu=lots"),
    (["cluster=puhti", "cluster.num_nodes=2"], "cluster.num_nodes=2: a job's nodes are its setting nodes=N. Fix: no"),
    # 0: no --mem line (the partition's default); 0G: --mem=0G, all of the node's memory
    (["cluster=puhti", "cluster.slurm.mem_per_gpu=0", "gpus=1"], "cluster.slurm.mem_per_gpu=0: a size above 0"),
    (["cluster=puhti", "cluster.slurm.mem_per_gpu=64", "gpus=1"], "cluster.slurm.mem_per_gpu=64: a size with its unit"),
    (["cluster=puhti", "cluster.slurm.mem_per_gpu=0G", "gpus=1"], "cluster.slurm.mem_per_gpu=0G: a size above 0"),
    (["cluster=puhti", "cluster.slurm.mem_full_node=all"], "cluster.slurm.mem_full_node=all"),
    (["cluster=puhti", "cluster.slurm.cpus_per_gpu=many"], "cluster.slurm.cpus_per_gpu=many"),
    (["cluster=puhti", "cluster.slurm.time=soon"], "cluster.slurm.time=soon"),
    # shorter than the requeue's warning (90 s), which would requeue the job again and again
    (["cluster=puhti", "cluster.slurm.time=00:01:00"], "cluster.slurm.time=00:01:00: at least 00:03:00"),
    (["cluster=puhti", "test=true", "cluster.slurm.test_time=2"], "cluster.slurm.test_time=2: at least 00:03:00"),
    # the job took test_time: the time given was dropped without a word
    (["cluster=puhti", "test=true", "cluster.slurm.time=02:00:00"], "cluster.slurm.time=02:00:00 with test=true: a"),
    # beyond the partition's limit: sbatch refuses it, or it waits forever
    (["cluster=puhti", "cluster.slurm.time=4-00:00:00"], "partition gpu of cluster=puhti takes at most 3-00:00:00"),
    (["cluster=puhti", "cluster.slurm.time=UNLIMITED"], "Fix: cluster.slurm.time=3-00:00:00 or less"),
    (["cluster=lumi", "cluster.slurm.time=2-12"], "partition standard-g of cluster=lumi takes at most 2-00:00:00"),
    (["cluster=mahti", "cluster.slurm.partition=gpumedium", "cluster.slurm.time=40:00:00"], "takes at most 1-12:00:00"),
    (["cluster=puhti", "cluster.slurm.partitions.0.max_time=3days"], "cluster.slurm.partitions.0.max_time=3days"),
    # a partition named beyond its size limits: rendered, for sbatch to refuse (or to wait for ever)
    (
        ["cluster=puhti", "cluster.slurm.partition=gpu", "nodes=50"],
        "nodes=50 x gpus=4: partition gpu of cluster=puhti takes at most 20 node(s) (configs/cluster/puhti.yaml). "
        "Fix: a job within those, or leave out cluster.slurm.partition to have the partition picked by the job's size",
    ),
    (["cluster=lumi", "cluster.slurm.partition=small-g", "gpus=8"], "takes at most 4 node(s), 7 GPUs per node"),
    (["cluster=mahti", "cluster.slurm.partition=gpusmall", "gpus=4"], "takes at most 1 node(s), 2 GPUs in all"),
    # YAML's reading of an unquoted 12:00:00: 43200 minutes, 30 days
    (["cluster=puhti", "cluster.slurm.time=43200"], "cluster.slurm.time=43200: 43200 minutes, as Slurm reads a number"),
    (["cluster=puhti", "cluster.slurm.account=my project"], "cluster.slurm.account=my project"),
    (
        ["cluster=puhti", "cluster.slurm.account=''"],
        "cluster.slurm.account=: a name of letters, digits and . _ + @ -, or null for none",
    ),
    (["cluster=puhti", "cluster.slurm.gpu_type=v100;reboot"], "cluster.slurm.gpu_type=v100;reboot"),
    (["cluster=puhti", "cluster.slurm.modules=pytorch"], "cluster.slurm.modules=pytorch"),
    (["cluster=puhti", "cluster.slurm.tme=1"], "cluster.slurm.tme"),
    (["cluster=puhti", "cluster.slurm.account=projé"], "(LexerNoViableAltException: cluster.slurm.account=projé). Fix"),
    (["cluster=puhti", "cluster.slurm.account=a,b"], "account=a,b: several values (a sweep). Fix: quote the value"),
    (["cluster=puhti", "launcher="], "launcher=: choose one of srun, torchrun, horovodrun"),
    # partition limits: sbatch refused these only once submitted (Mahti's gputest takes one node)
    (["cluster=mahti", "nodes=2", "test=true"], "(gputest) takes at most 1 node(s). Fix: nodes=1, or leave test out"),
    (["cluster=puhti", "nodes=21"], "takes 21 x 4 GPUs (at most 20 nodes). Fix: nodes=20 or fewer, or cluster.slurm"),
    (["cluster=puhti", "nodes=2", "cluster.slurm.partitions=[{name: gpu, max_gpus: 4}]"], "Fix: fewer GPUs, or "),
    (["cluster=puhti", "cluster.slurm.test_max_nodes=0"], "cluster.slurm.test_max_nodes=0: a count from 1 or null"),
    # a key added where the renderer reads only its own: rendered without it, not a word said
    (["cluster=puhti", "+cluster.slurm.qos=normal"], "+cluster.slurm.qos=normal: cluster.slurm has no key qos, and"),
    (["cluster=puhti", "+cluster.slurm.mail_type=END"], "Fix: +cluster.slurm.sbatch.mail-type=... for #SBATCH --mail"),
    # an #SBATCH option's name, not the close key's: cluster.slurm.container=v100 ran `v100 python` on the nodes
    (["cluster=puhti", "+cluster.slurm.constraint=v100"], "Fix: +cluster.slurm.sbatch.constraint=... for #SBATCH --"),
    (["cluster=puhti", "+cluster.slurm.sbatchh.qos=normal"], "Fix: cluster.slurm.sbatch in place of cluster.slurm.s"),
    (["cluster=puhti", "+cluster.slurm={qos: normal}"], "cluster.slurm has no key qos, and nothing reads a key added"),
    (["cluster=puhti", "+cluster.slurm.cpu_per_gpu=4"], "(its keys: account, partitions, partition, test_partition"),
    (["cluster=puhti", "++cluster.slurm.timee=2:00:00"], "Fix: cluster.slurm.time=2:00:00"),
    (["cluster=puhti", "+cluster.slurm.sbatch.time=1"], "sbatch.time=1: --time comes from cluster.slurm.time"),
    (["cluster=puhti", "+cluster.slurm.sbatch.signal=USR2"], "--signal comes from the script itself"),
    (["cluster=puhti", "+cluster.slurm.sbatch.Qos=normal"], "sbatch.Qos=normal: an sbatch option's long name"),
    (["cluster=puhti", "+cluster.slurm.sbatch.comment=a b"], "sbatch.comment=a b: one word (no spaces"),
    (["cluster=puhti", "+cluster.slurm.sbatch.qos='x#y'"], "sbatch.qos=x#y: one word"),
    (["cluster=puhti", "cluster.slurm.container='singularity exec"], "cluster.slurm.container"),
    (["cluster=puhti", "--", "trainer.max_epochs=1\nrm -rf ~"], "one line"),
    # an environment variable's name and value (exported as "[1, 2]" or "None"; Hydra's bare "Error merging")
    (["cluster=puhti", "+cluster.slurm.env.FOO=[1,2]"], "cluster.slurm.env.FOO=[1, 2]: one value: a string, a"),
    (["cluster=puhti", "+cluster.slurm.env.FOO=null"], "~cluster.slurm.env.FOO leaves it out"),
    (["cluster=puhti", "+cluster.slurm.env.A-B=1"], "cluster.slurm.env.A-B=1: a variable's name: letters, digits"),
    (["cluster=puhti", "+cluster.slurm.env.1A=x"], "cluster.slurm.env.1A is not a key that Hydra's overrides can name"),
    (["cluster=puhti", "cluster.slurm.env=[a]"], "env=[a]: cluster.slurm.env holds keys of its own, not a list. Fix"),
    (["cluster=puhti", "cluster.slurm.modules={a:1}"], "cluster.slurm.modules is a list, not a mapping. Fix"),
    # the key inside a mapping whose kind does not fit: it blamed cluster.slurm, "not a list"
    (["cluster=puhti", "cluster.slurm={modules:{a:1}}"], "cluster.slurm.modules is a list, not a mapping. Fix"),
    (["cluster=puhti", "cluster.slurm={time:1,env:[1]}"], "cluster.slurm.env holds keys of its own, not a list"),
    # a strategy that starts its own processes: each task started more (a crash on the nodes)
    (["cluster=puhti", "strategy=ddp_spawn"], "strategy=ddp_spawn starts its processes itself (start_method=spawn"),
    # a mapping with a key the profile lacks: "Could not override 'cluster.slurm'", no fix
    (["cluster=puhti", "cluster.slurm={x:1}"], "cluster.slurm={x:1}: cluster.slurm has no key x, and nothing reads"),
    (["cluster=puhti", "cluster.slurm.env={FOO:1}"], "env.FOO: no such key; known here: NCCL_DEBUG (+cluster.slurm"),
    # train.py's overrides, checked as train.py will check them on the nodes (not after the queue)
    (["cluster=puhti", "--", "data.batch_size=0"], "data.batch_size=0: an integer >= 1"),
    # refused on the nodes only, after the queue
    (["cluster=puhti", "strategy=deepspeed", "--", "speed.compile=default"], "speed.compile=default cannot be used w"),
    (["cluster=puhti", "strategy=horovod", "--", "speed.compile=default"], "cannot be used with strategy=horovod: "),
    (["cluster=puhti", "--", "trainer.max_epohcs=3"], "trainer.max_epohcs=3: no such key in the config"),
    (["cluster=puhti", "--", "resume=nowhere"], "resume=nowhere: no run was started there"),
    (["cluster=puhti", "--", "-m", "data.batch_size=16,32"], "-m: a batch script runs one training"),
    # the job printed, or checked, and ended COMPLETED without training
    (["cluster=puhti", "--", "--cfg", "job"], "-- --cfg: an option of train.py's, with which the job would not train"),
    (["cluster=puhti", "--", "--help"], "-- --help: an option of train.py's"),
    (["cluster=puhti", "--", "--info"], "-- --info: an option of train.py's"),
    # a new job's run has no checkpoint: refused on the nodes, after the queue
    (["cluster=puhti", "--", "ckpt_path=last"], "-- ckpt_path=last: the newest checkpoint of this job's own run (ou"),
    # each item one word in the script: `srun '--exclusive --mem=0'` failed on the nodes
    (["cluster=puhti", "cluster.slurm.srun_args=['--exclusive --mem=0']"], "srun_args.0='--exclusive --mem=0': one o"),
    # what the job's own settings set: Hydra let the last one win on the nodes (LUMI's profile on Puhti's V100s)
    (["cluster=puhti", "--", "cluster=lumi"], "-- cluster=lumi: the job's cluster comes from this command's settings"),
    (["cluster=puhti", "--", "trainer.devices=2"], "(the last one would win on the nodes). Fix: gpus=2 before --"),
    (["cluster=puhti", "--", "cluster.num_nodes=2"], "Fix: nodes=2 before --"),
    (["cluster=puhti", "--", "cluster.slurm.time=1:00:00"], "Fix: cluster.slurm.time=1:00:00 before --"),
    (["--write-scripts", "cluster=lumi", "nodes=7"], "--write-scripts with cluster=lumi nodes=7"),
]


@pytest.mark.parametrize(("argv", "words"), BAD_INPUTS, ids=[" ".join(argv) for argv, _ in BAD_INPUTS])
def test_a_bad_argument_gets_one_line_and_no_script(argv, words, tmp_path, capsys):
    script = tmp_path / "out" / "job.sh"
    try:
        code = slurm_main(["-o", str(script), *argv])
    except SystemExit as exit:  # argparse
        code = exit.code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2 and len(lines) == 1, captured.err
    assert lines[0].startswith("ERROR: ") and words in lines[0], lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "out").exists()


def test_a_profile_key_after_the_separator_gets_the_fix_that_works(capsys):
    """-- +cluster.slurm.qos=x got "Fix: +cluster.slurm.qos=x before --", which was then refused
    with another fix: the refusal of the key before -- is said at once."""
    assert slurm_main(["cluster=puhti", "--", "+cluster.slurm.qos=x"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "(the last one would win on the nodes); before -- it is refused too: +cluster.slurm.qos=x: " in line
    assert line.endswith(
        "Fix: +cluster.slurm.sbatch.qos=... for #SBATCH --qos, +cluster.slurm.env.qos=... for a "
        "variable, or leave +cluster.slurm.qos out"
    ), line


EXPERIMENTS = {  # an experiment file after --, what the script had fixed otherwise, and the fix
    "lumi": (
        "defaults: [{override /cluster: lumi}]",
        "chooses cluster=lumi, but the script is rendered for "
        "cluster=puhti, which it gives train.py first (and which wins over the file's choice). Fix: cluster=lumi",
    ),
    "zero": ("defaults: [{override /strategy: deepspeed_stage_2}]", "Fix: strategy=deepspeed_stage_2 before --"),
    "longer": (
        "cluster: {slurm: {time: '05:00:00'}}",
        "sets cluster.slurm.time=05:00:00, which only this command "
        "reads, for the script (01:00:00 here): train.py reads the file on the nodes, after the script was "
        "written. Fix: cluster.slurm.time=05:00:00 before --",
    ),
    "qos": ("cluster: {slurm: {sbatch: {qos: high}}}", "Fix: +cluster.slurm.sbatch.qos=high before --"),
    "big": (
        "cluster: {num_nodes: 2}",
        "sets cluster.num_nodes=2, but the job's size is this command's nodes=1, "
        "which the script gives train.py first (and which wins). Fix: nodes=2 before --",
    ),
}


@pytest.fixture
def experiments(tmp_path):
    folder = tmp_path / "mine" / "experiment"
    folder.mkdir(parents=True)
    for name, (text, _) in EXPERIMENTS.items():
        (folder / f"{name}.yaml").write_text(f"# @package _global_\n{text}\n")
    return f"hydra.searchpath=[file://{tmp_path / 'mine'}]"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_experiment_after_the_separator_that_sets_what_the_script_fixed_is_refused(name, experiments, capsys):
    """Read by train.py on the nodes after the script was written: its choice of cluster, its
    cluster.slurm.time or its nodes changed nothing there, without a word."""
    assert slurm_main(["cluster=puhti", "--", experiments, f"experiment={name}"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"ERROR: -- experiment={name} ") and EXPERIMENTS[name][1] in line, line
    assert captured.out == ""


@pytest.mark.parametrize(
    "settings, name",
    [
        (["cluster=lumi"], "lumi"),
        (["strategy=deepspeed_stage_2"], "zero"),
        (["cluster.slurm.time=05:00:00"], "longer"),
        (["+cluster.slurm.sbatch.qos=high"], "qos"),
        (["nodes=2"], "big"),
    ],
)
def test_the_fix_renders_the_experiments_job(settings, name, experiments, capsys):
    assert slurm_main(["cluster=puhti", *settings, "--", experiments, f"experiment={name}"]) == 0
    assert f"experiment={name}" in capsys.readouterr().out


def test_a_resumed_run_whose_start_chose_such_an_experiment_is_refused(experiments, tmp_path, capsys):
    """`-- resume=<run>` trains with the run's own overrides, its experiment among them: what that
    file sets of the job was left out of the script without a word."""
    run = tmp_path / "outputs" / "old"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=longer\n")
    (run / ".hydra" / "hydra.yaml").write_text(f"hydra:\n  overrides:\n    hydra:\n    - {experiments}\n")
    assert slurm_main(["cluster=puhti", "--", f"resume={run}"]) == 2
    line = capsys.readouterr().err.splitlines()[-1]  # after the resume's "no checkpoint there yet"
    assert line.startswith(f"ERROR: -- resume={run} (its start's experiment=longer) sets cluster.slurm.time=05:00:00")
    assert line.endswith("Fix: cluster.slurm.time=05:00:00 before --"), line
    assert slurm_main(["cluster=puhti", "cluster.slurm.time=05:00:00", "--", f"resume={run}"]) == 0


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_experiment_given_to_a_script_that_asks_for_other_job_settings_stops_it(name, experiments, capsys):
    """`sbatch <script> experiment=<name>`: sbatch had read the #SBATCH lines and the script gives
    train.py its cluster, strategy and size first, so the file's changed nothing, without a word.
    The script stops before the launch (slurm/arguments.py), with the command that renders a
    script for it; that command renders and submits one."""
    job = Job(load("cluster", "puhti"), "ddp")
    script = render_script(job)
    assert script_check([*job.settings, "--", experiments, f"experiment={name}"], script=script) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ERROR: experiment={name}, an argument of this script, "), line
    _, fix = line.split(". Fix: submit a script rendered for it, python -m {{ cookiecutter.package_name }}.slurm ")
    settings = shlex.split(fix)
    assert "--submit" in settings
    settings.remove("--submit")
    assert slurm_main(settings) == 0, capsys.readouterr().err
    assert f"experiment={name}" in capsys.readouterr().out


def test_a_script_given_an_experiment_it_can_run_goes_on(experiments, tmp_path, capsys):
    """An experiment that sets the model or the training passes; so does one whose job settings the
    script already has (edited by hand to them), and any other argument, for which nothing is read."""
    folder = tmp_path / "mine" / "experiment"
    (folder / "plain.yaml").write_text("# @package _global_\ntrainer: {max_epochs: 3}\n")
    job = Job(load("cluster", "puhti"), "ddp")
    settings, script = [*job.settings, "--", experiments], render_script(job)
    assert script_check([*settings, "experiment=plain"], script=script) == 0
    edited = script.replace("#SBATCH --time=01:00:00", "#SBATCH --time=05:00:00")
    assert script_check([*settings, "experiment=longer"], script=edited) == 0
    assert script_check([*job.settings, "--", "trainer.max_epochs=3"], script="unread") == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("time", "seconds"),
    [("30", 1800), ("30:15", 1815), ("2:00:00", 7200), ("1-12", 129600), ("1-0:30", 88200), ("3-00:00:01", 259201)],
)
def test_slurm_times_are_read_as_slurm_reads_them(time, seconds):
    """`30` is 30 minutes and `1-12` a day and a half; a sweep's timeout_min (whole minutes) read
    them as 30 seconds (1 minute) and a day and 12 seconds."""
    from {{ cookiecutter.package_name }}.slurm.checks import seconds as read
    from {{ cookiecutter.package_name }}.slurm.sweep import _minutes

    assert read(time) == seconds and _minutes(time) == -(-seconds // 60)


def test_a_time_at_the_partitions_limit_is_taken(capsys):
    assert slurm_main(["cluster=lumi", "gpus=4", "cluster.slurm.time=3-00:00:00"]) == 0  # small-g: 3 days
    assert "#SBATCH --partition=small-g" in capsys.readouterr().out
    # the first partition of the job's size is too short: the next one that takes its time
    partitions = 'cluster.slurm.partitions=[{name:short,max_time:"04:00:00"},{name:long,max_time:"3-00:00:00"}]'
    assert slurm_main(["cluster=puhti", partitions, "cluster.slurm.time=12:00:00"]) == 0
    assert "#SBATCH --partition=long" in capsys.readouterr().out


def test_a_value_outside_hydras_syntax_takes_the_quoted_form_the_line_gives(capsys):
    """The fix of a value with é or a comma: quoted as the line says, it is taken as written."""
    assert slurm_main(["cluster=puhti", "cluster.slurm.account=projé"]) == 2
    fix = capsys.readouterr().err.split("Fix: quote the value, ")[1].strip()
    assert fix == """'cluster.slurm.account="projé"'"""
    assert slurm_main(["cluster=puhti", fix.strip("'")]) == 0
    assert "#SBATCH --account=projé" in capsys.readouterr().out


def test_the_list_of_clusters_leaves_out_the_tests_own(capsys):
    assert slurm_main(["cluster=nowhere"]) == 2
    line = capsys.readouterr().err
    assert "choose one of: generic, local, lumi," in line and "localslurm" not in line


def test_settings_may_follow_an_option(tmp_path, capsys):
    """argparse took a setting after -o for an unrecognized argument."""
    script = tmp_path / "job.sh"
    assert slurm_main(["cluster=puhti", "-o", str(script), "nodes=2"]) == 0
    assert "#SBATCH --nodes=2" in script.read_text()


def test_the_script_never_replaces_a_file_that_is_not_a_batch_script(tmp_path, capsys):
    """`-o train.py` (or README.md, configs/train.yaml) replaced the project's own file with a script."""
    mine = tmp_path / "train.py"
    mine.write_text("print('my training code')\n")
    assert slurm_main(["-o", str(mine), "cluster=puhti"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ERROR: -o {mine}: a file that is not a batch script, which writing would replace.")
    assert mine.read_text() == "print('my training code')\n"
    # Files that only mention #SBATCH: they were replaced (README.md by a script, the scripts' own template)
    for name in ("README.md", "docs/deepspeed.md", "src/{{ cookiecutter.package_name }}/slurm/job.sh.j2"):
        theirs = tmp_path / Path(name).name
        shutil.copy(PROJECT / name, theirs)
        assert slurm_main(["-o", str(theirs), "cluster=puhti"]) == 2, name
        assert capsys.readouterr().err.startswith(f"ERROR: -o {theirs}: a file that is not a batch script")
        assert theirs.read_text() == (PROJECT / name).read_text()
    script = tmp_path / "job.sh"
    assert slurm_main(["-o", str(script), "cluster=puhti"]) == 0
    assert slurm_main(["-o", str(script), "cluster=puhti", "nodes=2"]) == 0  # its own script: written again
    assert "--nodes=2" in script.read_text()


def test_submit_without_sbatch_gets_one_line_and_no_script(tmp_path, monkeypatch, capsys):
    """Before: FileNotFoundError's traceback, with the script left in logs/."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.chdir(tmp_path)
    assert slurm_main(["cluster=puhti", "gpus=1", "--submit"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ERROR: --submit: sbatch is not on PATH") and "Fix: " in line
    assert not list(tmp_path.iterdir())


def test_the_command_line_prints_one_line_without_a_traceback(tmp_path):
    renderer = "{{ cookiecutter.package_name }}.slurm"
    result = subprocess.run(
        [sys.executable, "-m", renderer, "cluster=puhti", "cluster.slurm.mem_per_gpu=lots"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=project_env(),
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "cluster.slurm.mem_per_gpu=lots" in result.stderr
    assert not list(tmp_path.iterdir())


def render(argv: list[str], capsys) -> str:
    assert slurm_main(argv) == 0
    return capsys.readouterr().out


def test_the_partition_that_generic_yaml_suggests_works(capsys):
    assert "#SBATCH --partition=gpu\n" in render(["cluster=generic", "cluster.slurm.partition=gpu"], capsys)
    assert "#SBATCH --partition" not in render(["cluster=generic"], capsys)


def test_what_the_renderers_new_refusals_leave_to_train_py_passes(tmp_path, capsys):
    """Refused: ckpt_path=last for a new job's own run, the options that print, srun options in one
    item. Not: ckpt_path=last with the run to resume, an option's value with spaces."""
    import yaml

    from {{ cookiecutter.package_name }}.callbacks.checkpoints import ForwardOnlyCheckpointIO

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["trainer.max_epochs=1"]))
    ForwardOnlyCheckpointIO().save_checkpoint({"global_step": 4}, run / "checkpoints" / "last.ckpt")
    assert f"resume={run} ckpt_path=last" in render(["cluster=puhti", "--", f"resume={run}", "ckpt_path=last"], capsys)
    spaced = "cluster.slurm.srun_args=['--comment=two words']"  # one option, its value with a space
    assert "'--comment=two words'" in render(["cluster=puhti", spaced], capsys)


def test_gpus_all_means_a_whole_node(capsys):
    assert render(["cluster=puhti", "gpus=all"], capsys) == render(["cluster=puhti"], capsys).replace(
        "cluster=puhti`", "cluster=puhti gpus=all`"
    )


def test_profile_values_reach_the_shell_as_text_not_commands(tmp_path, capsys):
    """$(...) in modules, paths, srun options, the container and env values stays text; $VARIABLES expand."""
    text = render(
        [
            "cluster=lumi",
            "cluster.slurm.modules=['$(touch ran-module)']",
            "cluster.slurm.module_use=['$(touch ran-use)']",
            "cluster.slurm.venv='$(touch ran-venv)'",
            "cluster.slurm.env.NCCL_NET_GDR_LEVEL='$(touch ran-env)`touch ran-tick`\"'",
            "cluster.slurm.env.MIOPEN_USER_DB_PATH=/tmp/$USER",
        ],
        capsys,
    )
    assert "module load '$(touch ran-module)'" in text
    # The software and environment lines, with a `module` that does nothing (no modules here).
    setup = text.split("# Rendezvous")[0].splitlines()
    lines = [line for line in setup if line.startswith(("module ", "export ", "if [[", "    source", "fi"))]
    slurm = "SLURM_CPUS_PER_TASK=1 SLURM_JOB_ID=1 NODES=(n1)"
    shell = "\n".join(["module() { :; }", "set -u", slurm, *lines, 'echo "$MIOPEN_USER_DB_PATH"'])
    result = subprocess.run(["bash", "-c", shell], cwd=tmp_path, capture_output=True, text=True, env={"USER": "me"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "/tmp/me\n" and not list(tmp_path.iterdir())


def test_a_variable_in_a_path_with_a_space_expands(tmp_path, capsys):
    """'$HOME/my venv' was quoted as text: the script looked for a folder named $HOME, and the job ran
    without its venv, without a word."""
    text = render(["cluster=puhti", "cluster.slurm.venv='$HOME/my venv'", "cluster.slurm.modules=['$HOME x']"], capsys)
    assert 'module load "$HOME x"' in text
    venv = tmp_path / "my venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "activate").write_text("echo activated\n")
    lines = [line for line in text.splitlines() if line.startswith(("if [[", "    source", "fi"))]
    home = {"HOME": str(tmp_path)}
    result = subprocess.run(["bash", "-uc", "\n".join(lines)], capture_output=True, text=True, env=home)
    assert result.stdout == "activated\n", result.stderr


def test_an_env_value_of_true_is_exported_as_yaml_wrote_it(capsys):
    """Python's str() exported it as "True"."""
    text = render(["cluster=puhti", "+cluster.slurm.env.WANDB_SILENT=true", "+cluster.slurm.env.N=2"], capsys)
    assert 'export WANDB_SILENT="true"' in text and 'export N="2"' in text


@pytest.mark.parametrize("cluster", ["puhti", "mahti"])
def test_the_scratch_note_runs_under_set_u_without_local_scratch(cluster, capsys):
    (note,) = [line for line in render([f"cluster={cluster}"], capsys).splitlines() if "node-local disk" in line]
    result = subprocess.run(["bash", "-euc", note], capture_output=True, text=True, env={})
    assert result.returncode == 0, result.stderr
    assert "node-local disk: unset" in result.stdout
    set_ = subprocess.run(["bash", "-euc", note], capture_output=True, text=True, env={"LOCAL_SCRATCH": "/nvme/1"})
    assert "node-local disk: /nvme/1 " in set_.stdout


def test_a_newline_in_a_profile_value_is_refused_on_one_line():
    """#SBATCH lines are comments to bash: a newline in a value would start a command."""
    profile = load("cluster", "puhti")
    profile["slurm"]["account"] = "project_1\nrm -rf ~"
    with pytest.raises(ProfileError) as refused:
        Job(profile, "ddp")
    assert "\n" not in str(refused.value) and str(refused.value).startswith("cluster.slurm.account='project_1\\n")


def test_a_script_path_that_cannot_be_written_gets_one_line(tmp_path, capsys):
    (tmp_path / "notes").write_text("mine")
    assert slurm_main(["-o", str(tmp_path / "notes" / "job.sh"), "cluster=puhti"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ERROR: -o {tmp_path / 'notes' / 'job.sh'} cannot be made: {tmp_path / 'notes'} is a file")


def test_a_profiles_sbatch_extras_must_be_options_by_name():
    profile = load("cluster", "puhti")
    profile["slurm"]["sbatch"] = ["--qos=normal"]  # as srun_args are written
    with pytest.raises(ProfileError, match=r"cluster.slurm.sbatch=\['--qos=normal'\]: #SBATCH options by long name"):
        Job(profile, "ddp")
