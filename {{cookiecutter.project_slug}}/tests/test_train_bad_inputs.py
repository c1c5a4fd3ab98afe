"""Every wrong value on train.py's command line stops with ONE line that names the key, the
value, what is allowed and the fix: exit 2, no traceback, no run directory.

Most rows call the check that train.py runs before Hydra (launch/command_line.py) in this
process: it needs no torch and no process of its own. A few rows run train.py itself, for
what only shows once the run has started (GPUs, the data, the number of processes).
"""

import os
import subprocess
import sys
import zipfile

import pytest
import torch

from {{ cookiecutter.package_name }}.data.mnist import MNISTDataModule
from {{ cookiecutter.package_name }}.data.synthetic import SyntheticDataModule
from {{ cookiecutter.package_name }}.launch import checks
from {{ cookiecutter.package_name }}.launch.command_line import check_command_line
from {{ cookiecutter.package_name }}.launch.environment import not_a_number, register_resolvers, stale_rank
from {{ cookiecutter.package_name }}.launch.errors import SetupError

from tests.helpers import PROJECT, project_env, write_small_mnist

register_resolvers()

# overrides, a part of the one line that must name the fix
BAD_VALUES = [
    (["data.batch_size=0"], "data.batch_size=0: an integer >= 1"),
    (["data.batch_size=-8"], "data.batch_size=-8: an integer >= 1"),
    (["data.batch_size=abc"], "data.batch_size=abc: an integer >= 1"),
    (["data.batch_size=1.5"], "data.batch_size=1.5: an integer >= 1"),
    (["data.batch_size=true"], "data.batch_size=true: an integer >= 1"),
    (["data.batch_size="], "data.batch_size='': an integer >= 1"),
    # text that reads as a number: shown as 128, the same as its fix
    (['data.batch_size="128"'], 'data.batch_size="128": an integer >= 1'),
    (["data.num_workers=-1"], "data.num_workers=-1: auto or an integer >= 0"),
    (["data.num_workers=many"], "data.num_workers=many: auto or an integer >= 0"),
    (["data=synthetic", "data.num_samples=0"], "data.num_samples=0: an integer >= 1"),
    (["data.val_size=-1"], "data.val_size=-1: an integer >= 0"),
    (["trainer.limit_train_batches=0"], "trainer.limit_train_batches=0: null, a number of batches >= 1, or a fract"),
    (["trainer.limit_train_batches=0.0"], "(0 trains nothing). Fix: e.g. trainer.limit_train_batches=0.1"),
    (["data=synthetic", "data.image_shape=[3,5,32]"], "data.image_shape=[3,5,32]: [channels, height, width]"),
    (["data=synthetic", "model.num_classes=5"], "model.num_classes=5: fewer than the data's 10 classes"),
    (["data=synthetic", "data.num_classes=20", "model.num_classes=9"], "model.num_classes=9: fewer than the data's 20"),
    # one class: the accuracy refused it once the run folder was made, naming model.*
    (["data=synthetic", "data.num_classes=1"], "data.num_classes=1: an integer >= 2. Fix: e.g. data.num_classes=10"),
    (["model.num_classes=1"], "model.num_classes=1: an integer >= 2"),
    (["model.num_classes=5"], f"fewer than the data's 10 classes ({MNISTDataModule.__module__}.MNISTDataModule.num"),
    # the network built for other images: a traceback at its first step ("cannot be multiplied")
    (["model.net.image_shape=[1,32,32]"], "model.net.image_shape=[1,32,32]: the data's images are [1,28,28] ("),
    (
        ["data=synthetic", "data.image_shape=[3,32,32]", "model=autoencoder", "model.net.image_shape=[1,28,28]"],
        "the data's images are [3,32,32] (data.image_shape). Fix: leave model.net.image_shape out",
    ),
    (["data=synthetic", "data.image_shape=[784]"], "data.image_shape=[784]: [channels, height, width]: integers"),
    (["data.download=maybe"], "data.download=maybe: true or false"),
    (["data.in_memory=1"], "data.in_memory=1: true or false"),
    (["model.optimizer.lr=abc"], "model.optimizer.lr=abc: a finite number >= 0 (the learning rate"),
    (["model.optimizer.lr=-1e-3"], "model.optimizer.lr=-0.001: a finite number >= 0"),
    (["model.optimizer.lr=[1]"], "model.optimizer.lr=[1]: a finite number >= 0"),
    # trained on with every loss NaN, and exited 0
    (["model.optimizer.lr=inf"], "model.optimizer.lr=inf: a finite number >= 0 (the learning rate)"),
    (["model.optimizer.weight_decay=inf"], "model.optimizer.weight_decay=inf: a finite number >= 0"),
    (["model.optimizer.weight_decay=-1"], "model.optimizer.weight_decay=-1: a finite number >= 0"),
    (["+model.optimizer.betas=[0.9]"], "model.optimizer.betas=[0.9]: two numbers in [0, 1)"),
    (["+model.optimizer.betas=[0.9,1.5]"], "model.optimizer.betas=[0.9,1.5]: two numbers in [0, 1)"),
    (["+model.optimizer.eps=0"], "model.optimizer.eps=0: a number > 0"),
    (["+model.optimizer.foo=1"], "model.optimizer.foo=1: not an argument of "),  # the project's optim.adamw
    (["+model.optimizer.lrr=1"], "Fix: did you mean model.optimizer.lr=1? Else remove +model.optimizer.lrr"),
    (["+model.net.chanels=8"], "Fix: did you mean +model.net.channels=8? Else remove +model.net.chanels"),
    (["data=synthetic", "+data.foo=1"], ".data.synthetic.SyntheticDataModule (it takes num_samples, image_shape"),
    (["logger=tensorboard", "+logger.foo=1"], "not an argument of pytorch_lightning.loggers.TensorBoardLogger (it"),
    (["logger=tensorboard", "+logger.flush_sec=5"], "Fix: did you mean +logger.flush_secs=5? Else remove +logger"),
    (["logger=tensorboard", "+logger.log_dir=x"], "logger.log_dir=x: not an argument of pytorch_lightning.loggers"),
    (["logger=csv", "+logger.foo=1"], ".loggers.AppendingCSVLogger (it takes save_dir, name, version"),
    (["model.net._target_=torch.nn.Linear"], "not an argument of torch.nn.Linear (it takes in_features"),
    # another kind of object: Hydra's report blamed the model's own keys (model.optimizer=...)
    (["model._target_=torch.nn.Linear"], "model._target_=torch.nn.Linear: not a LightningModule (what the Trainer"),
    (["data._target_=torch.nn.Linear"], "data._target_=torch.nn.Linear: not a LightningDataModule (what the"),
    (["logger=csv", "logger._target_=torch.nn.Linear"], "logger._target_=torch.nn.Linear: not a Logger (what the"),
    (["callbacks.progress_bar._target_=torch.nn.Linear"], "Fix: a class of pytorch_lightning.callbacks, or the"),
    (["model.optimizer._target_=torch.optim.Nope"], "model.optimizer._target_=torch.optim.Nope: does not import"),
    (["+callbacks.foo.x=1"], "callbacks.foo={'x':1}: a callback needs a _target_"),
    (["callbacks.progress_bar=null"], "progress_bar=null: a callback needs a _target_ (the class to build). Fix: ~"),
    # a strategy's arguments: a string was taken as true, or letter by letter
    (["strategy=ddp", "strategy.instance.find_unused_parameters=maybe"], "find_unused_parameters=maybe: true or"),
    (["strategy=ddp", "strategy.instance.gradient_as_bucket_view=1"], "gradient_as_bucket_view=1: true or false"),
    (["strategy=deepspeed_stage_2", "strategy.instance.stage=5"], "strategy.instance.stage=5: 0, 1, 2 or 3 (ZeRO"),
    (["strategy=deepspeed_stage_3_offload", "strategy.instance.offload_optimizer=cpu"], "offload_optimizer=cpu: true"),
    (["strategy=fsdp2", "strategy.instance.layers=Nope"], "layers=Nope: null (every module with parameters) or class"),
    (["callbacks.progress_bar.show=train/loss"], "callbacks.progress_bar.show=train/loss: a list of logged metric"),
    # Hydra said only "Error merging override ..." (the line began "ERROR: : "), or to quote the value
    (["model.net=[1]"], "model.net=[1]: model.net holds keys of its own, not a list. Fix: set them one at a time"),
    # a mapping for a mapping that lacks one of its keys: it said "model=cnn has no key net"
    (["model.net={b:1}"], "model.net={b:1}: model.net has no key b (it has _target_, num_classes, image_shape). Fix: "),
    (["trainer={b:[1]}"], "trainer={b:[1]}: trainer has no key b (it has "),
    # a string where Lightning or a callback takes a bool or a number: Lightning's refusal named no key, or none
    (["trainer.benchmark=maybe"], "trainer.benchmark=maybe: null, true or false (cudnn's benchmark)"),
    (["callbacks.checkpoint.save_top_k=abc"], "callbacks.checkpoint.save_top_k=abc: an integer >= -1"),
    (["strategy=ddp", "+strategy.instance.static_graph=maybe"], "strategy.instance.static_graph=maybe: true or"),
    (["+logger.default_hp_metric=maybe"], "logger.default_hp_metric=maybe: true or false"),
    # a key added at the top that the config has below, or that train.py reads without +: trained as if not given
    # a key added where the project reads only its own keys: nothing read it, and the run went on without it
    (["+speed.compiled=default"], "+speed.compiled=default: speed has no key compiled, and nothing reads a key"),
    (["+speed.compile_mode=max-autotune"], "(its keys: matmul_precision, cudnn_benchmark, compile). Fix: speed.co"),
    (["++speed.benchmark=false"], "++speed.benchmark=false: speed has no key benchmark"),
    (["+cluster.devicez=2"], "+cluster.devicez=2: cluster has no key devicez, and nothing reads a key added th"),
    (["cluster=puhti", "+cluster.slurm.qos=normal"], "Fix: +cluster.slurm.sbatch.qos=... for #SBATCH --qos, +clu"),
    (["+cluster.slurm.qos=normal"], "cluster.slurm is null with cluster=local, and nothing reads a key added there."),
    (["+cluster.slurm.sbatch.qos=normal"], "+cluster.slurm.sbatch.qos=normal: cluster.slurm is null with cluster=lo"),
    (["cluster.slurm.partition=gpu"], "Fix: leave cluster.slurm.partition out; Slurm settings come with a cluster th"),
    (["cluster.slurm={time: 1}"], "cluster.slurm={time: 1}: cluster.slurm is null with cluster=local, and nothing"),
    (["+strategy.foo=1"], "+strategy.foo=1: strategy has no key foo, and nothing reads a key added there (its ke"),
    # one level further down, or inside a mapping: the first key that is not there is named
    (["cluster=puhti", "+cluster.slurm.sbatchh.qos=normal"], "Fix: cluster.slurm.sbatch in place of cluster.slurm.sb"),
    (["strategy=ddp", "+strategy.instanc.static_graph=true"], "Fix: strategy.instance in place of strategy.instanc"),
    (["++speed={compiled: default}"], "++speed={compiled: default}: speed has no key compiled, and nothing reads"),
    (["speed={compiled: default}"], "Fix: speed.compile in place of speed.compiled"),  # it said: add one with +
    (["cluster=puhti", "cluster.slurm={qos: normal}"], "cluster.slurm has no key qos, and nothing reads a key added"),
    # the plain form: Hydra's refusal ended in "+speed.compiled=... adds one"
    (["speed.compiled=default"], "speed.compiled=default: speed has no key compiled, and nothing reads a key added th"),
    (["+max_epochs=5"], "+max_epochs=5: nothing reads max_epochs at the top of the config; trainer.max_epochs is wh"),
    (["hydra.output_subdir=null"], "hydra.output_subdir=null: a run keeps its config in .hydra (a resume in .h"),
    (["+seed=3"], "+seed=3: seed is already in the config. Fix: seed=3 (without +)"),  # not data.seed
    (["+lr=0.1"], "+lr=0.1: nothing reads lr at the top of the config; model.optimizer.lr is where it is read. Fix"),
    (["+resume=outputs/run"], "+resume=outputs/run: resume= takes no +; with it a new run started. Fix: resume=outp"),
    # a sweep the basic sweeper cannot run: Hydra's traceback once the sweep had started
    (["-m", "model.optimizer.lr=interval(0.1,0.2)"], "lr=interval(0.1,0.2): interval() is for sweepers that draw"),
    # several choices of a group: Hydra merged them into one config (one logger, an odd model)
    (["logger=[csv,tensorboard]"], "logger=[csv,tensorboard]: logger takes one of its choices (csv, tensorboard, w"),
    (["model/optimizer=[adam,sgd]"], "model/optimizer=[adam,sgd]: model/optimizer takes one of its choices (adamw"),
    (["hydra.run={dir:[1]}"], "hydra.run={dir:[1]}: hydra.run.dir: Cannot convert 'ListConfig' to string: '[1]'. Fix"),
    (["model=[cnn,autoencoder]"], "model=[cnn,autoencoder]: model takes one of its choices (autoencoder, cnn); a list"),
    (["model={net:{x:1}}"], "model={net:{x:1}}: model.net has no key x (it has _target_, num_classes, image_shape)"),
    (["data=synthetic", "data={image_shape:{a:1}}"], "data.image_shape is a list, not a mapping. Fix"),
    (["model={net:[1]}"], "model={net:[1]}: model.net holds keys of its own, not a list. Fix: set them one at a time"),
    (["data=synthetic", "data.image_shape={a:1}"], "image_shape is a list, not a mapping. Fix: data.image_shape=["),
    (["+model.1a=1"], "+model.1a=1: model.1a is not a key that Hydra's overrides can name (such as a.b_c"),
    (["seed=abc"], "seed=abc: an integer"),
    (["run_id="], "run_id='': a folder name without /"),
    (["run_id=../elsewhere"], "run_id=../elsewhere: a folder name without /"),
    (["run_id=multirun"], "run_id=multirun: a folder name without /, at most 255 bytes, not multirun (the sweeps')"),
    ([f"run_id={'a' * 256}"], "a folder name without /, at most 255 bytes"),  # before: OSError, file name too long
    (["ckpt_path=best"], "ckpt_path=best: Lightning's name for a checkpoint of the fit it is running, none when"),
    (["ckpt_path=hpc"], "ckpt_path=hpc: Lightning's name for a checkpoint of the fit it is running"),
    (["model=autoencoder", "model.net.hidden=0"], "model.net.hidden=0: an integer >= 1"),
    (["seed=1.5"], "seed=1.5: an integer"),
    # Lightning's seed_everything (numpy) and torch's generator refused them in a traceback, once training began
    (["seed=-1"], "seed=-1: an integer from 0 to 4294967295. Fix: e.g. seed=42"),
    (["data.seed=18446744073709551616"], "data.seed=18446744073709551616: an integer from 0 to 4294967295"),
    (["test_after_fit=yes please"], "test_after_fit=yes please: true or false"),
    (["trainer.max_epochs=0"], "trainer.max_epochs=0: an integer >= 1 (-1: no limit)"),
    (["trainer.max_epochs=ten"], "trainer.max_epochs=ten: an integer >= 1"),
    (["trainer.devices=0"], "trainer.devices=0: an integer >= 1, -1 (all), auto"),
    (["trainer.devices=two"], "trainer.devices=two: an integer >= 1"),
    (["trainer.num_nodes=0"], "trainer.num_nodes=0: an integer >= 1"),
    (["cluster.devices=abc"], "cluster.devices=abc: an integer >= 1"),
    (["cluster.num_nodes=-3"], "cluster.num_nodes=-3: an integer >= 1"),
    (["trainer.accelerator=tpu"], "trainer.accelerator=tpu: one of auto, cpu, gpu, cuda"),
    (["trainer.precision=fp8"], "trainer.precision=fp8: one of 32-true"),
    (["trainer.precision=8"], "trainer.precision=8: one of 32-true"),
    (["callbacks.progress_bar.every_n_steps=0"], "callbacks.progress_bar.every_n_steps=0: an integer >= 1"),
    (["callbacks.last_checkpoint.every_n_epochs=0"], "callbacks.last_checkpoint.every_n_epochs=0: an integer >= 1"),
    (["callbacks.timed_checkpoint.every_minutes=abc"], "callbacks.timed_checkpoint.every_minutes=abc: a number >= 0"),
    (["callbacks.timed_checkpoint.agree_every_seconds=0"], "agree_every_seconds=0: a number > 0"),
    (["callbacks.save_on_stop.agree_every_seconds=0"], "callbacks.save_on_stop.agree_every_seconds=0: a number > 0"),
    (["trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0: an integer >= 1"),
    (["trainer.gradient_clip_val=-1"], "trainer.gradient_clip_val=-1: null or a number >= 0"),
    (["trainer.sync_batchnorm=sure"], "trainer.sync_batchnorm=sure: true or false"),
    (["trainer.log_every_n_steps=0"], "trainer.log_every_n_steps=0: an integer >= 1"),
    (["trainer.limit_train_batches=1.5"], "trainer.limit_train_batches=1.5: null, a number of batches"),
    (["trainer.limit_val_batches=-2"], "trainer.limit_val_batches=-2: null, a number of batches"),
    (["trainer.num_sanity_val_steps=-5"], "trainer.num_sanity_val_steps=-5: an integer >= 0"),
    (["trainer.profiler=fast"], "trainer.profiler=fast: null or one of simple, advanced, pytorch"),
    # Trainer arguments added with +trainer.<key>=...: each is Lightning's, with a value it takes
    (
        ["+trainer.max_step=100"],
        "trainer.max_step=100: not an argument of Lightning's Trainer. Fix: did you mean +trainer.max_steps=100? Else",
    ),
    (["+trainer.foo=1"], "trainer.foo=1: not an argument of Lightning's Trainer. Fix: remove +trainer.foo; the"),
    (["+trainer.strategy=ddp"], "trainer.strategy=ddp: set by the project, not here. Fix: strategy=ddp"),
    (["+trainer.logger=false"], "trainer.logger=false: set by the project, not here. Fix: logger=csv"),
    (["+trainer.callbacks=[]"], "trainer.callbacks=[]: set by the project, not here. Fix: callbacks.<name>"),
    (["+trainer.max_steps=abc"], "trainer.max_steps=abc: an integer >= 1 (-1: no limit). Fix: e.g. +trainer.max_steps"),
    (["+trainer.val_check_interval=0"], "trainer.val_check_interval=0: null, a number of batches >= 1, a fraction"),
    (["+trainer.val_check_interval=1.5"], "trainer.val_check_interval=1.5: null, a number of batches >= 1"),
    (["+trainer.max_time=1:00:00"], 'trainer.max_time=1:00:00: null, "DD:HH:MM:SS" or {hours: ...'),
    (["+trainer.max_time={hour:1}"], "trainer.max_time={'hour':1}: null, \"DD:HH:MM:SS\""),
    # trained nothing and exited 0
    (["+trainer.max_time=00:00:00:00"], 'trainer.max_time=00:00:00:00: null, "DD:HH:MM:SS" or {hours: ...'),
    (["+trainer.max_time={hours:0}"], "longer than 0. Fix: e.g. +trainer.max_time=00:23:30:00"),
    (["+trainer.val_check_interval=00:00:00:00"], 'a time "DD:HH:MM:SS" > 0'),
    (["+trainer.check_val_every_n_epoch=0"], "trainer.check_val_every_n_epoch=0: null or an integer >= 1"),
    (["+trainer.overfit_batches=-1"], "trainer.overfit_batches=-1: a number of batches or a fraction in [0, 1]"),
    (["+trainer.deterministic=maybe"], "trainer.deterministic=maybe: null, true, false or warn"),
    (["+trainer.enable_progress_bar=false"], "trainer.enable_progress_bar=false: the bar is the callback"),
    (["+trainer.enable_checkpointing=false"], "callbacks checkpoint, last_checkpoint save checkpoints"),
    (["+trainer.barebones=true"], "trainer.barebones=true: Lightning's barebones Trainer takes no logger"),
    (["trainer.precision=16-true"], "trainer.precision=16-true: the optimizer's eps (1e-08) is below float16's"),
    (["trainer.precision=16-true", "+model.optimizer.eps=1e-6"], "(1e-06) is below float16's smallest normal number"),
    # Choices, keys and the override syntax
    (["cluster=foo"], "cluster=foo: no such choice of cluster; allowed: generic, local, lumi"),
    (["strategy=dpp"], "strategy=dpp: no such choice of strategy; allowed: auto, ddp"),
    (["cluster=_base"], "cluster=_base: a base of the other cluster choices, not one itself; allowed: generic"),
    (["hydra/launcher=foo"], "hydra/launcher=foo: no such choice of hydra/launcher; allowed: basic"),
    (["experiment=nope"], "experiment=nope: no such choice of experiment; allowed: mnist_autoencoder, smoke"),
    (["model=resnet"], "model=resnet: no such choice of model; allowed: autoencoder, cnn. Fix: model=<one of those>"),
    # the fix is the closest choice, not the first (cluster=puthi was told cluster=generic)
    (["cluster=puthi"], "allowed: generic, local, lumi, mahti, narvi, palmetto, puhti. Fix: cluster=puhti"),
    (["strategy=DDP"], "strategy=DDP: no such choice of strategy; allowed: auto, ddp"),
    (["strategy=deepsped_stage_2"], "Fix: strategy=deepspeed_stage_2"),
    (["logger=tensorbord"], "Fix: logger=tensorboard"),
    (["logger=null"], "logger=null: logger is a config group and takes one of its choices: csv, tensorboard, wandb"),
    (["strategy=null"], "strategy=null: strategy is a config group and takes one of its choices: auto, ddp"),
    # a key train.py needs, left out: a traceback in the run; data=null's fix named ~data
    (["~data"], "~data: train.py needs data; it cannot be left out. Fix: drop ~data, or data=<one of: mnist, synth"),
    (["~seed"], "~seed: train.py needs seed; it cannot be left out. Fix: drop ~seed, or seed=<another value>"),
    (["trainer.max_epohcs=3"], "trainer.max_epohcs=3: no such key in the config. Fix: did you mean trainer.max_epochs"),
    (["foo=1"], "foo=1: no such key in the config. Fix:"),
    # A key of another choice: judged against the config the choices make, not the default one
    (["data=synthetic", "data.val_size=3"], "data.val_size=3: data=synthetic has no key val_size (data=mnist has)"),
    (["experiment=smoke", "data.root=/x"], "Fix: data=mnist, or a key of data=synthetic (`python train.py experiment"),
    (["data=synthetic", "data.batch_sise=3"], "did you mean data.batch_size? `python train.py data=synthetic --cfg"),
    (["--foo"], "--foo: not an option of train.py. Fix: `python train.py --help` lists them"),
    (["seed=1", "-m", "data.batch_size=16,32"], "data.batch_size=16,32: an override after an option (-m), which"),
    (["seed=1", "--cfg", "job", "seed=2"], "Fix: the options first, then all overrides: python train.py --cfg job"),
    (["-m", "--cfg", "job"], "--multirun with --cfg: Hydra does one of these at a time. Fix: leave out all but one"),
    # Hydra's own options that met a ValueError's traceback
    (["--shell-completion"], "--shell-completion: needs what to do: install=bash (or zsh, fish), or uninstall=bash."),
    (["-sc", "install=tcsh"], "--shell-completion install=tcsh: Hydra completes in bash, zsh, fish. Fix: install=bash"),
    (["-sc", "install"], "--shell-completion install: Hydra completes in bash, zsh, fish. Fix: install=bash"),
    (["-sc", "query=bash"], "--shell-completion query=bash: the shell's completion asks this as you press"),  # KeyError
    (["--experimental-rerun", "x.pickle"], "--experimental-rerun x.pickle: Hydra's rerun needs a config.pickle"),
    # a root config or config folder of one's own: no check ran (a traceback after the run folder was made),
    # and resume= went on with configs/train.yaml
    (["--config-name", "big", "seed=1"], "--config-name big: train.py runs configs/train.yaml; its checks and resume"),
    (["-cn", "big.yaml"], "Fix: your settings as an experiment: configs/experiment/big.yaml, its first line `# @pa"),
    (["--cfg", "job", "-cn", "big"], "--config-name big: train.py runs configs/train.yaml"),
    (["-cp", "/tmp/x"], "--config-path /tmp/x: a config folder that resume= would not find again (and train.py's"),
    (["-cd", "/tmp/x"], "Fix: keep train.yaml in configs/; for config files of your own elsewhere, 'hydra.searchpa"),
    # train.yaml named as such is checked as ever
    (["-cn", "train", "trainer.max_epochs=abc"], "trainer.max_epochs=abc: an integer >= 1"),
    (["-cp", "configs", "-cd", str(PROJECT / "configs"), "data.batch_size=0"], "data.batch_size=0: an integer >= 1"),
    (["--cfg", "job", "model=resnet"], "model=resnet: no such choice of model; allowed: autoencoder, cnn"),
    (["data.root="], "data.root='': a folder (where MNIST is, or is downloaded to), not a file. Fix: e.g. data.root"),
    (["data.root=/etc/hostname"], "data.root=/etc/hostname: a folder (where MNIST is, or is downloaded to), not"),
    (["run_id=a,b"], "run_id=a,b: a comma lists values to sweep over (with -m) or the items of a list. Fix: run_id="),
    (["--cfg", "job", "trainer.max_epohcs=3"], "trainer.max_epohcs=3: no such key in the config. Fix: did you mean"),
    (["~nokey"], "~nokey: no such key in the config"),
    (["+cluster=lumi"], "+cluster=lumi: cluster is already in the config. Fix: cluster=lumi (without +)"),
    (["data.batch_size=[1,"], "data.batch_size=[1,: not a valid override"),
    (["run_id=é"], "run_id=é: not a valid override (LexerNoViableAltException: run_id=é). Fix: key=value"),
    # the best checkpoint's own name: its quoted form, not a generic one
    (["ckpt_path=out/epoch=0-step=20.ckpt"], "for the shell as well: 'ckpt_path=\"out/epoch=0-step=20.ckpt\"'"),
    # another run's folder: its checkpoints were overwritten, exit 0
    (["callbacks.last_checkpoint.dirpath=/tmp/other/checkpoints"], "callbacks.last_checkpoint.dirpath=/tmp/other/chec"),
    # outside the run (every run the same file), or last.ckpt, which the next best removed
    (["+callbacks.checkpoint.filename=/tmp/best"], "callbacks.checkpoint.filename=/tmp/best: a name inside its dirpa"),
    (["+callbacks.checkpoint.filename=../../up"], "callbacks.checkpoint.filename=../../up: a name inside its dirpath"),
    (["+callbacks.checkpoint.filename=last"], "callbacks.checkpoint.filename=last: the name of last.ckpt, the run's n"),
    (["callbacks.checkpoint.dirpath=null"], "callbacks.checkpoint.dirpath=null: a folder inside the run's (${output_d"),
    (["callbacks.last_checkpoint.dirpath=${output_dir}/ckpts"], "dirpath=${output_dir}/ckpts: the run's own folder"),
    (["callbacks.save_on_stop.run_dir=/proc/x"], "Fix: leave it out; for checkpoints on another disk, output_root="),
    # the run's checkpoints went there, its .hydra record (which resume= reads) to output_root/run_id
    (["output_dir=/tmp/x/od"], "output_dir=/tmp/x/od: the run's folder is output_root/run_id, where Hydra keeps its"),
    (["output_dir=/tmp/x/my run"], "Fix: output_root=/tmp/x run_id='my run'"),
    (["++output_dir=/tmp/x/od"], "Fix: output_root=/tmp/x run_id=od"),
    (["trainer.default_root_dir=/tmp/x"], "trainer.default_root_dir=/tmp/x: the run's own folder (${output_dir}), wh"),
    (["+trainer.default_root_dir=/tmp/x"], "+trainer.default_root_dir=/tmp/x: trainer.default_root_dir is already in"),
    # built without them: a traceback in the first step, once the run folder was made
    (["model.net=null"], "model.net=null: the model needs the network it trains, built from a _target_. Fix: leave"),
    (["model=autoencoder", "model.net=null"], "model.net=null: the model needs the network it trains"),
    (["model.optimizer=null"], "model.optimizer=null: the model needs the optimizer that trains it, built from a"),
    # a traceback once the run's folder was made ("optimizer got an empty parameter list")
    (["model.net=5"], "model.net=5: the model needs the network it trains, built from a _target_. Fix: leave"),
    (["model.optimizer=adam"], "model.optimizer=adam: the model needs the optimizer that trains it, built from a"),
    (["model.net.num_classes=3"], "model.net.num_classes=3: the network's outputs are the model's classes (model.n"),
    # quoted as the fix for a value with special characters said, it became a folder named ~ in the project
    (["output_root=~/runs"], "output_root=~/runs: ~ means your home folder to a shell only (Hydra cannot read it th"),
    (["data.root=~/mnist"], f"Fix: data.root={os.path.expanduser('~/mnist')}"),
    (['output_root="~/runs"'], "output_root=~/runs: ~ means your home folder to a shell only (Hydra cannot read it"),
    (['ckpt_path="~/run/last.ckpt"'], f"Fix: ckpt_path={os.path.expanduser('~/run/last.ckpt')}"),
    (['logger.save_dir="~/logs"'], f"Fix: logger.save_dir={os.path.expanduser('~/logs')}"),
    (["-m", "seed=1,2", 'hydra.sweep.dir="~/sweep"'], f"Fix: hydra.sweep.dir={os.path.expanduser('~/sweep')}"),
    # the second point was refused in the first one's folder, then a traceback; a file: FileExistsError's
    (["-m", "seed=1,2", "hydra.sweep.subdir=x"], "hydra.sweep.subdir=x: the same folder for all 2 points of the sweep"),
    (["-m", "seed=1,2", "hydra.sweep.dir=/etc/hostname"], "hydra.sweep.dir=/etc/hostname: "),
    (["-m", "run_id=fixed", "seed=1,2"], "run_id=fixed with -m: a sweep's points run in its folder, one subfolder"),
    # refused after Hydra had made the run folder's parents (output_root=new/deep)
    (["speed.compile=bogus"], "speed.compile=bogus: false or a torch.compile mode: default, reduce-overhead, max-aut"),
    (["speed.matmul_precision=low"], "speed.matmul_precision=low: one of highest, high, medium. Fix: e.g. speed.matm"),
    (["speed.cudnn_benchmark=maybe"], "speed.cudnn_benchmark=maybe: true or false"),
    # the relative paths named folders inside the run's: "MNIST is not under data/MNIST/raw"
    (["hydra.job.chdir=true"], "hydra.job.chdir=true: the run would work in its own folder, where the project's re"),
    (["hydra.job.chdir=1"], "hydra.job.chdir=true: the run would work in its own folder"),  # Hydra reads 1 as true
    (["output_root=/proc/no/such/dir"], "output_root=/proc/no/such/dir: cannot be written: /proc is not writable"),
    (["logger.save_dir=/proc/x"], "logger.save_dir=/proc/x: cannot be written: /proc is not writable"),  # a traceback
    # folders below save_dir: a traceback once the run folder was made, or logs written outside the run
    (["logger.name=/proc/x"], "logger.name=/proc/x: a folder inside logger.save_dir (the run's folder), where the log"),
    (["logger=csv", "logger.version=/tmp/y"], "Fix: a name such as logger.version=logs; for logs on another disk, ou"),
    # every run given it wrote into the same metrics.csv (and hparams.yaml), exit 0
    (["logger=csv", "logger.save_dir=/tmp/logs"], "logger.save_dir=/tmp/logs: a folder outside the run's, where ever"),
    (["logger.save_dir=${output_dir}/../tb"], "/../tb: a folder outside the run's, where every run given it writes"),
    (["callbacks.checkpoint.dirpath=${output_dir}/../x"], "/../x: a folder inside the run's (${output_dir}/...)"),
    (["logger.name=../../escape"], "logger.name=../../escape: a folder inside logger.save_dir"),
    (["output_root=${oc.env:RV_UNSET}"], "'RV_UNSET' not found\". Fix: set what it refers to, or give output_root"),
    (["ckpt_path=/nonexistent.ckpt"], "ckpt_path=/nonexistent.ckpt: no such file or directory. Fix: ckpt_path=last"),
    (["ckpt_path="], "ckpt_path='': a checkpoint to start from. Fix: ckpt_path=last with run_id=<the run>, or the"),
    (["ckpt_path=' '"], "or leave it out to start fresh"),  # both: a traceback after the run folder was made
]


def _messages(line: str) -> None:
    """The one-line form: ERROR: key=value: what is allowed. Fix: what to do."""
    assert line.startswith("ERROR: ") and "Fix: " in line, line
    assert "weights_only=False" not in line


@pytest.fixture
def clean_env(monkeypatch):
    """As a user starts it: no launcher's rank, no HYDRA_FULL_ERROR."""
    for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("COMP_LINE", raising=False)  # set by a shell's completion only
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)


def refused(overrides: list[str], capsys, tmp_path) -> str:
    """Run train.py's check on the overrides; return the line it printed (it must exit 2)."""
    out = tmp_path / "outputs"
    with pytest.raises(SystemExit) as stopped:
        check_command_line([*overrides, f"output_root={out}"] if "output_root" not in str(overrides) else overrides)
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert not out.exists(), "a refused run made its output directory"
    return lines[0]


@pytest.mark.parametrize(("overrides", "message"), BAD_VALUES, ids=[" ".join(row[0]) for row in BAD_VALUES])
def test_wrong_value_stops_with_one_line(overrides, message, capsys, tmp_path, clean_env):
    line = refused(overrides, capsys, tmp_path)
    _messages(line)
    assert message in line


@pytest.mark.parametrize("given", ["", "a-file"])
def test_a_wrong_value_from_an_environment_variable_names_the_variable(given, capsys, tmp_path, clean_env, monkeypatch):
    """DATA_DIR= or DATA_DIR=<a file> was reported as data.root=..., which the user had not typed."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / given) if given else "")
    line = refused([], capsys, tmp_path)
    shown = str(tmp_path / given) if given else "''"
    assert line.startswith(f"ERROR: data.root={shown} (from $DATA_DIR): a folder (where MNIST is"), line
    assert line.endswith("Fix: e.g. DATA_DIR=data, or unset DATA_DIR (then data.root=data)"), line
    monkeypatch.delenv("DATA_DIR")  # typed as an override, the line names the override
    line = refused([f"data.root={tmp_path / 'a-file'}"], capsys, tmp_path)
    assert line.endswith("not a file. Fix: e.g. data.root=data"), line


def test_a_key_that_an_experiment_file_adds_where_nothing_reads_it_stops_with_one_line(capsys, tmp_path, clean_env):
    """speed.compiled: in an experiment file was merged into the config and read by nothing: the run
    went on uncompiled, exit 0. Its own choices (here another strategy and cluster) are no such key."""
    (tmp_path / "mine" / "experiment").mkdir(parents=True)
    typo = tmp_path / "mine" / "experiment" / "typo.yaml"
    head = "# @package _global_\ndefaults:\n  - override /strategy: ddp\n  - override /cluster: puhti\n"
    typo.write_text(head + "speed:\n  compiled: default\n")
    searchpath = f"hydra.searchpath=[file://{tmp_path / 'mine'}]"
    line = refused([searchpath, "experiment=typo"], capsys, tmp_path)
    said = "ERROR: experiment=typo: experiment/typo.yaml (in hydra.searchpath) sets speed.compiled: speed has no key c"
    assert line.startswith(said) and line.endswith("Fix: speed.compile in that file"), line
    typo.write_text(head + "cluster:\n  slurm:\n    qos: normal\n")
    line = refused([searchpath, "experiment=typo"], capsys, tmp_path)
    assert "sets cluster.slurm.qos: cluster.slurm has no key qos" in line, line
    assert line.endswith("Fix: cluster.slurm.sbatch.qos in that file for #SBATCH --qos, cluster.slurm.env.qos for a v"
                         "ariable, or remove it"), line  # fmt: skip
    typo.write_text(head.replace("puhti", "local") + "cluster:\n  slurm:\n    time: '02:00:00'\n")
    line = refused([searchpath, "experiment=typo"], capsys, tmp_path)
    assert "sets cluster.slurm: cluster.slurm is null with cluster=local" in line, line
    typo.write_text(head + "speed:\n  compile: default\ncluster:\n  slurm:\n    time: '02:00:00'\n")
    check_command_line([searchpath, "experiment=typo", f"output_root={tmp_path}"])


def test_the_keys_that_a_strategy_sets_where_it_needs_them_are_not_refused(capsys, tmp_path, clean_env):
    """strategy.mpi, .requires, .no_compile and .launcher are read where a strategy's file sets them."""
    optional = ["+strategy.mpi=false", "+strategy.requires={cuda: false}"]
    check_command_line(["strategy=ddp", *optional, f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_config_files_of_ones_own_in_hydra_searchpath_pass_the_key_checks(capsys, tmp_path, clean_env):
    """The check's second composition left out hydra.searchpath: a cluster of one's own chosen by an experiment,
    or beside one, was refused as 'no such choice of cluster'."""
    mine = tmp_path / "mine"
    (mine / "cluster").mkdir(parents=True)
    (mine / "experiment").mkdir()
    (mine / "cluster" / "mycl.yaml").write_text("defaults:\n  - _base\nname: mycl\n")
    (mine / "experiment" / "mine.yaml").write_text("# @package _global_\ndefaults:\n  - override /cluster: mycl\n")
    (mine / "experiment" / "fast.yaml").write_text("# @package _global_\nspeed:\n  compile: default\n")
    searchpath = f"hydra.searchpath=[file://{mine}]"
    for chosen in (["experiment=mine"], ["cluster=mycl", "experiment=fast"], ["experiment=[smoke,fast]"]):
        check_command_line([searchpath, *chosen, "cluster.accelerator=cpu", f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""
    line = refused([searchpath, "cluster=mycl", "speed.compiled=x"], capsys, tmp_path)
    assert line.startswith("ERROR: speed.compiled=x: speed has no key compiled") and line.endswith("speed.compile=x")


def test_a_key_that_a_runs_start_added_where_nothing_read_it_is_dropped_on_resume(capsys, tmp_path, clean_env):
    """A run started before this check with +speed.compiled=default trained without it. Its resume
    was refused with a fix (speed.compile=...) that was refused again: the line names the run's start
    and the fix that works, ~speed.compiled."""
    from {{ cookiecutter.package_name }}.launch.run_directory import resume_overrides

    run = tmp_path / "outputs" / "old"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- experiment=smoke\n- +speed.compiled=default\n")
    resumed = resume_overrides([f"resume={run}"])
    assert "no checkpoint there yet" in capsys.readouterr().err  # it had stopped before its first save
    line = refused(resumed, capsys, tmp_path / "elsewhere")
    said = f"ERROR: +speed.compiled=default (from the start of the run in {run}): speed has no key compiled"
    assert line.startswith(said) and line.endswith("Fix: ~speed.compiled with resume= (the run trained without it)")
    check_command_line(resume_overrides([f"resume={run}", "~speed.compiled"]))
    # one level further down, and in a mapping: the fix names the key that was set, which ~ can drop
    deeper = (("+strategy.instanc.x=1", "~strategy.instanc.x"), ("'++speed={compiled: x}'", "~speed.compiled"))
    for saved, dropped in deeper:
        (run / ".hydra" / "overrides.yaml").write_text(f"- experiment=smoke\n- {saved}\n")
        resumed = resume_overrides([f"resume={run}"])
        capsys.readouterr()
        line = refused(resumed, capsys, tmp_path / "elsewhere")
        assert line.endswith(f"Fix: {dropped} with resume= (the run trained without it)"), line
        check_command_line(resume_overrides([f"resume={run}", dropped]))


def test_an_experiment_file_without_its_package_line_stops_with_one_line(capsys, tmp_path, clean_env):
    """Without `# @package _global_` its settings landed under experiment.*, which nothing reads: the
    run trained with none of them, exit 0."""
    (tmp_path / "mine" / "experiment").mkdir(parents=True)
    (tmp_path / "mine" / "experiment" / "nohead.yaml").write_text("trainer:\n  max_epochs: 1\n")
    searchpath = f"hydra.searchpath=[file://{tmp_path / 'mine'}]"
    line = refused([searchpath, "experiment=nohead"], capsys, tmp_path)
    assert line.startswith("ERROR: experiment=nohead: experiment/nohead.yaml (in hydra.searchpath) lacks its first li")
    (tmp_path / "mine" / "experiment" / "nohead.yaml").write_text("# @package _global_\ntrainer:\n  max_epochs: 1\n")
    check_command_line([searchpath, "experiment=nohead", f"output_root={tmp_path}"])


def test_only_a_group_that_may_be_left_out_is_offered_so(capsys, tmp_path, clean_env):
    """data=null's fix named ~data, which then ended the run with a traceback."""
    assert refused(["data=null"], capsys, tmp_path).endswith("Fix: e.g. data=mnist")
    assert refused(["logger=null"], capsys, tmp_path).endswith("Fix: e.g. logger=csv, or ~logger to leave it out")


def test_right_values_pass(capsys, tmp_path, clean_env):
    good = ["experiment=smoke", "trainer.devices=auto", "trainer.limit_train_batches=0.5", "model.optimizer.lr=3e-4"]
    check_command_line([*good, "data.num_workers=2", "trainer.precision=bf16-mixed", f"output_root={tmp_path}"])
    check_command_line(["-m", "data.batch_size=16,32", f"output_root={tmp_path}"])
    check_command_line(["-m", "seed=1,2", "hydra.sweep.subdir=seed_${seed}", f"output_root={tmp_path}"])
    mine = ["+callbacks.acc._target_=pytorch_lightning.callbacks.ModelCheckpoint", "+callbacks.acc.monitor=val/acc"]
    mine += ["+callbacks.acc.dirpath=${output_dir}/checkpoints/acc"]  # a checkpoint of your own, inside the run
    mine += ["callbacks.last_checkpoint.dirpath=${output_dir}/checkpoints/"]  # the same folder, written with a /
    mine += ['+callbacks.acc.filename="acc/{epoch}"', "logger=csv", "logger.save_dir=${output_dir}/logs"]
    check_command_line([*mine, f"output_root={tmp_path}"])
    # last.ckpt of a folder of its own; logs elsewhere in a folder of each run's; no working folder change
    mine = [*mine[:3], "+callbacks.acc.filename=last", f"logger.save_dir={tmp_path}/logs", "logger.version=${run_id}"]
    mine += ["hydra.job.chdir=false"]
    check_command_line([*mine, f"output_root={tmp_path}"])
    check_command_line(["~logger", "~experiment", "~callbacks.progress_bar", f"output_root={tmp_path}"])
    lenient = ["trainer.precision=16", "trainer.devices=[0]", "model.optimizer.lr=0"]  # what Lightning takes too
    check_command_line([*lenient, f"output_root={tmp_path}"])
    half = ["trainer.precision=16-true", "+model.optimizer.eps=1e-4"]  # float16 holds it
    check_command_line([*half, f"output_root={tmp_path}"])
    check_command_line([half[0], "model.optimizer._target_=torch.optim.SGD", f"output_root={tmp_path}"])  # no eps
    # Hydra's runtime values, which exist only once Hydra runs (the folders it makes are noted before)
    check_command_line(["hydra.run.dir=outputs/${hydra:job.name}", f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_a_model_of_ones_own_may_take_its_parts_as_other_values():
    """model.net=5 is refused for the project's models, which build it from a _target_; not for others."""
    from omegaconf import OmegaConf

    from {{ cookiecutter.package_name }}.launch.targets import check_model_parts

    own = {"_target_": "my_models.Net", "net": "resnet18", "optimizer": {"name": "adam", "lr": 1e-3}}
    check_model_parts(OmegaConf.create({"model": own}))
    ours = {**own, "_target_": "{{ cookiecutter.package_name }}.models.classifier.ImageClassifier"}
    with pytest.raises(SetupError, match=r"^model.net=resnet18: the model needs the network it trains, built from"):
        check_model_parts(OmegaConf.create({"model": ours}))


def test_shell_completion_installs_and_completes(tmp_path, clean_env):
    """What the shell-completion checks let through still works: install=, and query= as the
    shell's completion asks it, with COMP_LINE set."""
    command = [sys.executable, str(PROJECT / "train.py"), "-sc"]
    run = dict(cwd=PROJECT, capture_output=True, text=True, timeout=120)
    installed = subprocess.run([*command, "install=bash"], env=project_env(), **run)
    assert installed.returncode == 0 and "complete -o nospace" in installed.stdout, installed.stderr
    typed = project_env(COMP_LINE="python train.py strat", COMP_POINT="21")
    completed = subprocess.run([*command, "query=bash"], env=typed, **run)
    assert completed.returncode == 0 and "strategy=" in completed.stdout.split(), completed.stderr


def test_trainer_arguments_lightning_takes_pass(capsys, tmp_path, clean_env):
    added = ["+trainer.max_steps=500", "+trainer.val_check_interval=0.25", "+trainer.max_time=00:23:30:00"]
    added += ["+trainer.deterministic=warn", "+trainer.check_val_every_n_epoch=null", "+trainer.min_epochs=1"]
    check_command_line([*added, f"output_root={tmp_path}"])
    check_command_line(["+trainer.max_time={hours:23}", "+trainer.val_check_interval=50", f"output_root={tmp_path}"])
    # What Lightning refuses beside the project's callbacks, once they are removed too:
    without = ["~callbacks.checkpoint", "~callbacks.last_checkpoint", "+trainer.enable_checkpointing=false"]
    without += ["~callbacks.progress_bar", "+trainer.enable_progress_bar=false"]
    check_command_line([*without, f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_arguments_added_to_what_the_config_builds_pass_where_taken(capsys, tmp_path, clean_env):
    added = ["+callbacks.lr._target_=pytorch_lightning.callbacks.LearningRateMonitor"]
    added += ["+callbacks.lr.logging_interval=step"]
    check_command_line([*added, "model.optimizer._target_=torch.optim.SGD", f"output_root={tmp_path}"])
    more = ["logger=tensorboard", "+logger.flush_secs=5", "model.num_classes=12"]  # more classes than MNIST's: taken
    check_command_line([*more, f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_the_tensorboard_logger_hands_on_what_the_check_lets_through(tmp_path):
    """launch/targets.py's PASSED_ON: the logger gives its **kwargs to the SummaryWriter, which takes flush_secs
    and refuses others, and sets log_dir itself."""
    from pytorch_lightning.loggers import TensorBoardLogger

    assert TensorBoardLogger(save_dir=tmp_path, flush_secs=5).experiment is not None
    for wrong in ({"foo": 1}, {"log_dir": str(tmp_path)}):
        with pytest.raises(TypeError):
            TensorBoardLogger(save_dir=tmp_path, **wrong).experiment  # noqa: B018 (the property builds the writer)


def test_the_trainer_arguments_are_lightnings():
    """launch/values.py keeps Lightning's Trainer arguments without importing it: the same list."""
    import inspect

    import pytorch_lightning as pl

    from {{ cookiecutter.package_name }}.launch.values import TRAINER_ARGUMENTS

    assert list(TRAINER_ARGUMENTS) == [name for name in inspect.signature(pl.Trainer).parameters]


def test_keys_of_ones_own_and_lists_of_callbacks_pass(capsys, tmp_path, clean_env):
    """A top-level key read through ${...}, one that names several keys below (cluster.name,
    strategy.name, ...), and a list of callbacks files (Hydra's multi-select adds them up)."""
    check_command_line(["+name=exp1", "run_id=${name}", f"output_root={tmp_path}"])
    check_command_line(["+name=exp1", f"output_root={tmp_path}"])
    check_command_line(["callbacks=[default]", f"output_root={tmp_path}"])
    # what Lightning adds to the command of the other ranks it starts (subprocess_script.py)
    lightning = [f"hydra.run.dir={tmp_path}/run", "hydra.job.name=train_ddp_process_1", "hydra.output_subdir=null"]
    check_command_line([*lightning, f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_every_point_of_a_sweep_is_checked_before_the_first_runs(capsys, tmp_path, clean_env):
    line = refused(["-m", "data.batch_size=16,0"], capsys, tmp_path)
    assert "data.batch_size=0: an integer >= 1" in line
    # a sweep that the check cannot split (glob needs the config's choices): Hydra runs it (an IndexError here)
    check_command_line(["-m", "model=glob(*)", f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_hydra_full_error_skips_the_check(monkeypatch, capsys):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # the user asked for Hydra's own traceback
    check_command_line(["seed=abc"])
    assert capsys.readouterr().err == ""


def test_only_rank_0_prints(monkeypatch, capsys, tmp_path, clean_env):
    monkeypatch.setenv("RANK", "1")  # srun and torchrun start every rank with the same command line
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as stopped:
        check_command_line(["seed=abc", f"output_root={tmp_path}"])
    assert stopped.value.code == 2 and capsys.readouterr().err == ""


def test_lightnings_start_of_each_rank_by_hand_is_not_taken_for_a_stale_rank(monkeypatch, clean_env):
    """Lightning's documented start of a node's ranks by hand: MASTER_ADDR, NODE_RANK, LOCAL_RANK."""
    by_hand = {"LOCAL_RANK": "1", "NODE_RANK": "0", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    for name, value in by_hand.items():
        monkeypatch.setenv(name, value)
    assert stale_rank() is None


@pytest.mark.parametrize("name", ["RANK", "LOCAL_RANK"])
def test_a_rank_left_in_the_shell_stops_with_one_line(name, tmp_path):
    """RANK=1 exported by hand (no launcher: no WORLD_SIZE): train.py took itself for rank 1,
    trained, exited 0, and left a run that logged nothing and that resume= could not find."""
    command = [sys.executable, str(PROJECT / "train.py"), "experiment=smoke", f"output_root={tmp_path / 'out'}"]
    ran = subprocess.run(command, cwd=PROJECT, env=project_env(**{name: "1"}), capture_output=True, text=True)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.strip() == (
        f"ERROR: {name}=1 is set, but no launcher started this process (torchrun and Lightning set WORLD_SIZE "
        f"beside it): train.py would take itself for rank 1 of a job, and log nothing. Fix: unset {name}"
    )
    assert not (tmp_path / "out").exists()


def test_a_launch_variable_that_is_not_a_number_stops_with_one_line(tmp_path):
    """SLURM_NTASKS=abc left in a shell inside a job: the topology check's int() met a traceback."""
    command = [sys.executable, str(PROJECT / "train.py"), "experiment=smoke", f"output_root={tmp_path / 'out'}"]
    env = project_env(SLURM_JOB_ID="5", SLURM_NTASKS="abc")
    ran = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.strip() == (
        "ERROR: SLURM_NTASKS='abc' in the environment: train.py and Lightning read it as a whole number >= 0 "
        "(launchers such as Slurm, torchrun and MPI set it for the processes they start). "
        "Fix: unset SLURM_NTASKS, or start train.py through its launcher"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "name, value", [("WORLD_SIZE", "2.0"), ("SLURM_CPUS_PER_TASK", ""), ("MASTER_PORT", "-1"), ("NODE_RANK", "¹")]
)
def test_each_launch_variable_is_checked(name, value):
    assert not_a_number({name: value}).startswith(f"{name}={value!r} in the environment: ")


def test_launch_variables_that_are_numbers_pass():
    env = {"RANK": "0", "WORLD_SIZE": "2", "SLURM_NTASKS": "8", "SLURM_RESTART_COUNT": "", "SLURM_JOB_ID": "x"}
    assert not_a_number(env) is None  # an empty restart count reads as 0; the job id is not read as a number


def _checkpoint_files(tmp_path):
    torch.save({"pytorch-lightning_version": "2.6.6", "state_dict": {"w": torch.zeros(2)}}, tmp_path / "good.ckpt")
    good = (tmp_path / "good.ckpt").read_bytes()
    (tmp_path / "empty.ckpt").write_bytes(b"")
    (tmp_path / "truncated.ckpt").write_bytes(good[: len(good) // 2])
    (tmp_path / "random.ckpt").write_bytes(os.urandom(4096))
    torch.save({"w": torch.zeros(2)}, tmp_path / "state_dict.pt")
    torch.save({"pytorch-lightning_version": "2.6.6", "data": zipfile.ZipInfo("x")}, tmp_path / "objects.ckpt")
    (tmp_path / "unreadable.ckpt").write_bytes(good)
    (tmp_path / "unreadable.ckpt").chmod(0)


CHECKPOINTS = [
    ("empty.ckpt", "not a PyTorch checkpoint (0 bytes"),
    ("truncated.ckpt", "not a PyTorch checkpoint ("),
    ("random.ckpt", "not a PyTorch checkpoint (4096 bytes"),
    ("state_dict.pt", "a torch file, but not a Lightning checkpoint"),
    ("objects.ckpt", "does not load as a checkpoint (it holds objects other than tensors and plain values)"),
    ("unreadable.ckpt", "not readable by this user"),
]


@pytest.mark.parametrize(("name", "message"), CHECKPOINTS, ids=[row[0] for row in CHECKPOINTS])
def test_bad_checkpoint_stops_with_one_line_never_suggesting_unsafe_loading(name, message, capsys, tmp_path, clean_env):
    if name == "unreadable.ckpt" and os.geteuid() == 0:
        pytest.skip("root reads every file")
    _checkpoint_files(tmp_path)
    line = refused([f"ckpt_path={tmp_path / name}"], capsys, tmp_path)
    _messages(line)
    assert f"ckpt_path={tmp_path / name}: {message}" in line


def test_a_lightning_checkpoint_and_sharded_directories_pass(capsys, tmp_path, clean_env):
    _checkpoint_files(tmp_path)
    check_command_line([f"ckpt_path={tmp_path / 'good.ckpt'}", f"output_root={tmp_path}"])
    check_command_line([f"ckpt_path={tmp_path}", "ckpt_path=last", f"output_root={tmp_path}"])
    assert capsys.readouterr().err == ""


def test_too_little_data_for_the_processes_names_the_batch_size():
    data = SyntheticDataModule(num_samples=64, batch_size=32)
    data.check_enough_for(2)  # 32 each: one batch
    with pytest.raises(SetupError, match=r"data.batch_size=32: more than the 22 training samples .* 3 process"):
        data.check_enough_for(3)


def test_a_synthetic_set_larger_than_memory_stops_with_one_line(monkeypatch):
    """Before: torch's allocation error, a traceback from inside fit (or, where Linux overcommits,
    a process killed later without a word)."""
    from {{ cookiecutter.package_name }}.data import memory, synthetic

    monkeypatch.setattr(memory, "available_memory", lambda: 10 * memory.GIB)
    monkeypatch.setattr(synthetic, "available_memory", lambda: 10 * memory.GIB)
    fits = 10 * memory.GIB // synthetic.bytes_to_make(1, (1, 28, 28))
    SyntheticDataModule(num_samples=fits).check_enough_for(1)
    too_many = f"data.num_samples={fits + 1}: about 10.0 GiB to make in memory, and 10.0 GiB are available here. "
    with pytest.raises(SetupError, match=f"^{too_many}Fix: data.num_samples={fits} or fewer$"):
        SyntheticDataModule(num_samples=fits + 1).check_enough_for(1)
    assert memory.available_memory() > 0  # the figure itself, as read from this machine (the real function)


def test_train_py_refuses_a_synthetic_set_larger_than_memory_before_any_file(tmp_path):
    overrides = ["data=synthetic", "data.num_samples=1000000000000", "trainer.accelerator=cpu"]
    (tmp_path / "kept").mkdir()  # the folders made for it go too; one that was there stays
    overrides.append(f"output_root={tmp_path / 'kept' / 'new' / '..' / 'new' / 'runs'}")
    command = [sys.executable, str(PROJECT / "train.py"), *overrides]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert line.startswith("ERROR: data.num_samples=1000000000000: about ") and "Traceback" not in result.stderr
    assert list(tmp_path.rglob("*")) == [tmp_path / "kept"], "a refused run left files"


def test_adamw_in_float16_needs_the_eps_that_the_check_asks_for():
    """Why trainer.precision=16-true refuses torch's default eps (launch/targets.py): with the weights
    and AdamW's state in float16, eps 1e-8 rounds to 0 and the weights become NaN within a few steps."""
    from {{ cookiecutter.package_name }}.launch.targets import FLOAT16_SMALLEST_NORMAL
    from {{ cookiecutter.package_name }}.optim import adamw

    assert FLOAT16_SMALLEST_NORMAL == pytest.approx(torch.finfo(torch.float16).tiny, rel=1e-3)

    def weights_after_training(eps: float) -> torch.Tensor:
        torch.manual_seed(0)
        net = torch.nn.Linear(784, 10).half()
        optimizer = adamw(net.parameters(), eps=eps, fused=False)
        for _ in range(40):
            images, labels = torch.rand(64, 784).half(), torch.randint(0, 10, (64,))
            torch.nn.functional.cross_entropy(net(images), labels).backward()
            optimizer.step()
            optimizer.zero_grad()
        return net.weight

    assert not weights_after_training(1e-8).isfinite().all()
    assert weights_after_training(1e-4).isfinite().all()


SETS = ("train", "val", "test")
BATCHES = {"train": 16, "val": 2, "test": 3}  # each process's, in a run that tests after fit
UNTESTED = {"train": 16, "val": 2}  # and in one that does not


@pytest.mark.filterwarnings("ignore:The `srun` command is available")  # where the tests' Slurm is installed
def test_epoch_settings_beyond_an_epochs_batches_stop_before_fit():
    """What Lightning finds wrong only once fit has started (launch/checks.py: check_epoch_length),
    on a Trainer built as run.py builds it; its own rules for fast_dev_run and check_val_every_n_epoch."""
    import pytorch_lightning as pl

    def trainer(**settings) -> pl.Trainer:
        quiet = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
        return pl.Trainer(accelerator="cpu", enable_model_summary=False, **quiet, **settings)

    with pytest.raises(SetupError, match=r"val_check_interval=17: more than the 16 training batches .*=16 or less"):
        checks.check_epoch_length(trainer(val_check_interval=17), UNTESTED)
    with pytest.raises(SetupError, match=r"the 4 training batches .* \(trainer.limit_train_batches=4\)"):
        checks.check_epoch_length(trainer(val_check_interval=5, limit_train_batches=4), UNTESTED)
    with pytest.raises(SetupError, match=r"limit_train_batches=0.05: less than one of the 16 .*=1, .* at least 1/16$"):
        checks.check_epoch_length(trainer(limit_train_batches=0.05), UNTESTED)
    for fine in (
        {"val_check_interval": 16},
        {"val_check_interval": 17, "check_val_every_n_epoch": None},  # counts batches across epochs
        {"val_check_interval": 100, "fast_dev_run": 2},  # Lightning validates after the 2 batches
        {"limit_train_batches": 0.0625},
        {"limit_train_batches": 0},  # no training: nothing to check
        {"val_check_interval": "00:00:00:01"},  # a time: Lightning sets no trainer.val_check_interval (a traceback)
        {"val_check_interval": {"seconds": 1}},
    ):
        checks.check_epoch_length(trainer(**fine), UNTESTED)
    checks.check_epoch_length(trainer(val_check_interval=17), dict.fromkeys(SETS))  # unknown
    # no validation in all the run's epochs: no val/loss, no best checkpoint, exit 0
    never = r"^trainer.check_val_every_n_epoch=5: more than the run's 2 epoch\(s\) .*Fix: \+trainer.check_val_every_n_e"
    with pytest.raises(SetupError, match=never):
        checks.check_epoch_length(trainer(max_epochs=2, check_val_every_n_epoch=5), UNTESTED)
    with pytest.raises(SetupError, match=never):  # data of a size known only once set up
        checks.check_epoch_length(trainer(max_epochs=2, check_val_every_n_epoch=5), dict.fromkeys(SETS))
    never = r"^trainer.val_check_interval=40: more than the run's 32 training batches \(2 epoch\(s\) of 16\)"
    with pytest.raises(SetupError, match=never):
        checks.check_epoch_length(trainer(max_epochs=2, val_check_interval=40, check_val_every_n_epoch=None), UNTESTED)
    for fine in (
        {"max_epochs": 2, "check_val_every_n_epoch": 5, "limit_val_batches": 0},  # no validation asked for
        {"max_epochs": -1, "max_steps": 10, "check_val_every_n_epoch": 5},  # no end in epochs
        {"max_epochs": 2, "val_check_interval": 32, "check_val_every_n_epoch": None},
    ):
        checks.check_epoch_length(trainer(**fine), UNTESTED)
    # overfit_batches sets both limits; the line names it
    with pytest.raises(SetupError, match=r"^trainer.overfit_batches=0.4: less than one of the 2 validation batches"):
        checks.check_epoch_length(trainer(overfit_batches=0.4), UNTESTED)
    val_limit = r"limit_val_batches=0.4: less than one of the 2 validation batches each process gets. Fix: .*=1, "
    with pytest.raises(SetupError, match=val_limit):
        checks.check_epoch_length(trainer(limit_val_batches=0.4), UNTESTED)
    checks.check_epoch_length(trainer(overfit_batches=0.5), UNTESTED)
    # The test set's limit counts where the run tests after fit (test_after_fit=true)
    checks.check_epoch_length(trainer(limit_test_batches=0.2), UNTESTED)
    with pytest.raises(SetupError, match=r"^trainer.limit_test_batches=0.2: .* 3 test .*e.g. \+trainer.limit_test"):
        checks.check_epoch_length(trainer(limit_test_batches=0.2), BATCHES)


def test_time_spans_given_as_mappings_reach_lightning_as_it_takes_them(tmp_path, clean_env):
    """+trainer.max_time={minutes: 5}, timedelta's arguments as Lightning documents them: Lightning
    was given Hydra's DictConfig and stopped with "Missing key total_seconds" blamed on no setting."""
    from hydra import compose, initialize_config_dir
    from pytorch_lightning.callbacks import Timer

    from {{ cookiecutter.package_name }}.launch.warnings import quiet_benign_messages
    from {{ cookiecutter.package_name }}.run import build_trainer

    quiet_benign_messages()  # as run.py does before it builds the Trainer (Lightning's srun hint, where srun is)
    spans = ["+trainer.max_time={minutes:5}", "+trainer.val_check_interval={seconds:1}"]
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cpu = ["data=synthetic", "trainer.accelerator=cpu", "trainer.devices=1", "logger=csv"]
        trainer = build_trainer(compose("train", overrides=[*cpu, f"output_dir={tmp_path}", *spans]))
    (timer,) = [callback for callback in trainer.callbacks if isinstance(callback, Timer)]
    assert timer._duration == 300 and trainer._val_check_time_interval == 1
    checks.check_epoch_length(trainer, UNTESTED)


def test_the_batches_the_check_counts_are_the_loaders(tmp_path):
    data = SyntheticDataModule(num_samples=1000, batch_size=64)  # 15 full training batches; 125 to validate
    mnist = MNISTDataModule(root=str(write_small_mnist(tmp_path)), download=False, batch_size=16, val_size=40)
    for module in (data, mnist):
        module.setup("fit")
        loaders = {"train": module.train_dataloader(), "val": module.val_dataloader(), "test": module.test_dataloader()}
        for stage, loader in loaders.items():
            assert module.batches(stage, 1) == len(loader), (module, stage)
    assert [data.batches(stage, processes) for processes in (1, 3) for stage in loaders] == [15, 2, 2, 5, 1, 1]
    assert [mnist.batches(stage, 1) for stage in loaders] == [13, 3, 4]  # 216 to train, 40 to validate, 64 to test


def test_deepspeed_not_installed_says_how_to_install_it_also_without_a_gpu(monkeypatch):
    from omegaconf import OmegaConf

    monkeypatch.setattr(checks, "_missing", lambda package: package == "deepspeed")
    strategy = OmegaConf.create(
        {"name": "deepspeed", "requires": {"cuda": True, "packages": ["deepspeed"], "install": "pip install ds"}}
    )
    for cuda_available in (False, True):
        with pytest.raises(SetupError, match=r"(?s)'deepspeed'.* not installed.*pip install ds"):
            checks.check_strategy(strategy, cuda_available=cuda_available)


def test_mnist_without_internet_names_the_download_module(monkeypatch, tmp_path):
    import importlib.util

    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: as if offline
    monkeypatch.setenv("no_proxy", "")
    with pytest.raises(SetupError) as error:
        MNISTDataModule(root=str(tmp_path)).prepare_data()
    message = str(error.value)
    assert "\n" not in message and "downloading it failed" in message
    module = message.split("python -m ")[1].split()[0]
    assert importlib.util.find_spec(module) is not None, f"{module} does not exist"


def test_the_download_command_offline_says_what_else_to_do(tmp_path):
    """The command the error above names, itself without internet: one line, exit 2, no traceback."""
    offline = {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
    command = [sys.executable, "-m", "{{ cookiecutter.package_name }}.data.mnist", str(tmp_path)]
    env = {**project_env(), **offline, "no_proxy": ""}
    result = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"ERROR: downloading MNIST into {tmp_path}/MNIST/raw failed ("), line
    assert "Fix: run this command where there is internet (a login node), or copy the files train-images" in line
    assert not list(tmp_path.iterdir()), "the failed download left its empty folders"


def test_the_download_command_takes_one_folder_it_can_write(tmp_path, capsys):
    """Before: `--help` downloaded into ./--help, a file or /proc was blamed on the internet, '' meant here."""
    from {{ cookiecutter.package_name }}.data.mnist import main

    (tmp_path / "afile").write_text("")
    for target, problem in [
        (str(tmp_path / "afile"), "cannot be made: "),
        ("/proc/no/such", "cannot be"),
        ("", "is empty"),
    ]:
        assert main([target]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"ERROR: DIR={target!r} {problem}") and "Fix: a folder of yours" in line, line
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0 and "Download MNIST into DIR/MNIST/raw" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stopped:
        main(["a", "b"])  # before: b was dropped without a word
    assert stopped.value.code == 2


@pytest.mark.parametrize("given", ["missing", "plain.ckpt"])
def test_converting_what_is_not_a_deepspeed_checkpoint_stops_with_one_line(given, tmp_path, capsys):
    from {{ cookiecutter.package_name }}.convert_zero_checkpoint import main

    (tmp_path / "plain.ckpt").write_bytes(b"")
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path / given)])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    reason = "a file, not the folder of a DeepSpeed checkpoint" if given.endswith(".ckpt") else "no such file or folder"
    assert line.startswith(f"ERROR: {tmp_path / given}: {reason}") and "Fix: the .ckpt folder a DeepSpeed run" in line


# the project's commands that parse options (python -m <package>.<command>)
COMMANDS = ["convert_zero_checkpoint", "data.mnist", "slurm", "torchrun"]  # horovodrun: test_horovod.py
COMMANDS += ["benchmark", "benchmark.overhead", "benchmark.scaling", "benchmark.epoch_end"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_commands_wrong_argument_gets_one_line_that_names_its_help(command):
    """A wrong option printed argparse's usage lines and then the error; the converter's usage
    named `python -m __main__`."""
    module = f"{{ cookiecutter.package_name }}.{command}"
    wrong = [sys.executable, "-m", module, "--no-such-option"]
    result = subprocess.run(wrong, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("ERROR: ") and f"(see python -m {module} --help)" in result.stderr


def test_converting_into_what_cannot_be_written_or_without_deepspeed_stops_with_one_line(tmp_path, capsys, monkeypatch):
    """Before: a traceback from mkdir, or DeepSpeed's import error once the output folder was made."""
    import importlib.util

    from {{ cookiecutter.package_name }}.convert_zero_checkpoint import main

    folder = tmp_path / "last.ckpt"
    folder.mkdir()
    (folder / "latest").write_text("global_step4")
    (tmp_path / "afile").write_text("")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else find_spec(name, *a)
    )
    for output, words in [
        (tmp_path / "afile" / "model.pt", "cannot be made: "),
        (tmp_path / "new" / "model.pt", "ERROR: converting needs DeepSpeed, which is not installed here. Fix: "),
    ]:
        with pytest.raises(SystemExit) as stopped:
            main([str(folder), str(output)])
        assert stopped.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert words in line and "Fix: " in line, line
    assert not (tmp_path / "new").exists()


def test_help_hides_bases_and_test_only_choices():
    result = subprocess.run(
        [sys.executable, "train.py", "--help"], cwd=PROJECT, env=project_env(), capture_output=True, text=True
    )
    groups = result.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert "cluster: generic, local, lumi" in groups
    assert "_base" not in groups and "localslurm" not in groups


# Found only once the run started: the data on disk, the processes, the GPUs. Run as a user would.
STARTED = [
    (
        ["experiment=smoke", "data.num_samples=64", "data.batch_size=32", "trainer.devices=3"],
        "data.batch_size=32: more than the 22 training samples that each of the 3 process(es) gets (64 in all), so "
        "nothing would train. Fix: data.batch_size=22 or less, fewer processes (trainer.devices), or more data",
    ),
    (["data=mnist", "data.root={data}", "data.download=false"], "data.root={data}: MNIST is not under"),
    (["data=mnist", "data.root={small}", "data.val_size=300"], "data.val_size=300: holds out all 256 training images"),
    (  # each value is allowed; Lightning's Trainer refuses them together
        ["experiment=smoke", "+trainer.check_val_every_n_epoch=null", "+trainer.val_check_interval=0.5"],
        "trainer: Lightning's Trainer refuses these settings: `val_check_interval` should be an integer",
    ),
    (  # Lightning would say so with a traceback once fit has started
        ["experiment=smoke", "+trainer.val_check_interval=50"],
        "trainer.val_check_interval=50: more than the 20 training batches each process gets in an epoch",
    ),
    (  # Lightning's DDP: IsADirectoryError once fit had started
        ["experiment=smoke", "ckpt_path={zero}"],
        "ckpt_path={zero}: a DeepSpeed checkpoint (a folder of shards), which strategy=auto cannot resume from",
    ),
]
STARTED_IDS = ["devices=3-tiny-set", "no-mnist", "val_size", "trainer-refuses", "val_check_interval-beyond-epoch"]
STARTED_IDS += ["deepspeed-folder-without-deepspeed"]
# A class of the config that refuses its settings as it is built: Hydra's report, exit 1, a run folder left
STARTED += [
    (
        ["experiment=smoke", "callbacks.checkpoint.mode=maximum"],
        "callbacks.checkpoint: ModelCheckpoint refuses these settings: `mode` can be min, max but got maximum. Fix: "
        "change the callbacks.checkpoint.* setting it names",
    ),
    (["experiment=smoke", "+model.net.dropout=1.5"], "model.net: MnistCNN refuses these settings: dropout probabil"),
    (["experiment=smoke", "trainer.devices=-1"], "trainer: Lightning's Trainer refuses these settings: `devices` sel"),
]
STARTED_IDS += ["callback-refuses", "model-refuses", "trainer-refuses-devices"]


@pytest.mark.parametrize(("overrides", "message"), STARTED, ids=STARTED_IDS)
def test_train_py_stops_with_one_line_and_leaves_no_run_directory(overrides, message, tmp_path):
    small = write_small_mnist(tmp_path / "small")
    zero = tmp_path / "zero.ckpt"  # the layout of a DeepSpeed checkpoint
    (zero / "checkpoint").mkdir(parents=True)
    (zero / "latest").write_text("checkpoint")
    paths = {"data": tmp_path / "nothing", "small": small, "zero": zero}
    overrides = [override.format(**paths) for override in overrides]
    out = tmp_path / "outputs"
    result = subprocess.run(
        [sys.executable, "train.py", *overrides, "trainer.accelerator=cpu", "logger=csv", f"output_root={out}"],
        cwd=PROJECT,
        env=project_env(CUDA_VISIBLE_DEVICES=""),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and message.format(**paths) in errors[0], result.stderr
    _messages(errors[0])
    assert "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir()), list(out.rglob("*"))
