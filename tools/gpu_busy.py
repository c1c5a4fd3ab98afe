"""How long the GPU itself works per step of the MNIST CNN, against the wall time per step.

If the GPU's work per step is shorter than the host's time per step, the host sets the pace
and a training loop can only be as fast as its host code: no GPU time is left to hide
Lightning's loop behind. Run from a baked project's root on a GPU machine, with its src/ on
PYTHONPATH (tools/gpu-figures.sh targets gpu-busy):

    python tools/gpu_busy.py PACKAGE

Per setting: samples/s, the wall time per step, and the GPU's kernel time per step summed by
torch.profiler (kernels and copies; the gaps between them do not count).
"""

import importlib
import sys
import time

import torch
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile

torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")
DEVICE = torch.device("cuda")
SAMPLES = 60000


def measure(cnn, batch: int, compile_what: str | None, dtype, steps=200, profiled=50):
    torch.manual_seed(0)
    net = cnn().to(DEVICE)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
    if compile_what == "model":
        net.compile(mode="reduce-overhead")

    def step(x, y):
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    run = torch.compile(step, mode="reduce-overhead") if compile_what == "step" else step
    images = torch.randn(SAMPLES, 1, 28, 28, device=DEVICE)
    labels = torch.randint(0, 10, (SAMPLES,), device=DEVICE)
    order = torch.randperm(SAMPLES, device=DEVICE)

    def steps_from(first, count):
        for i in range(first, first + count):
            start = (i * batch) % (SAMPLES - batch)
            chosen = order[start : start + batch]
            if compile_what:
                torch.compiler.cudagraph_mark_step_begin()
            run(images[chosen], labels[chosen])

    steps_from(0, 30)
    torch.cuda.synchronize()
    began = time.perf_counter()
    steps_from(30, steps)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - began) / steps
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        steps_from(30 + steps, profiled)
        torch.cuda.synchronize()
    on_gpu = [event for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA]
    kernels = sum(event.device_time_total for event in on_gpu)
    return batch / wall, wall * 1e6, kernels / profiled


def main() -> int:
    if not torch.cuda.is_available():
        print("gpu_busy.py measures a CUDA GPU's work, and torch sees none here. Fix: run it on a GPU machine")
        return 2
    cnn = importlib.import_module(f"{sys.argv[1]}.models.cnn").MnistCNN
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for batch, dtype in ((128, None), (1024, torch.bfloat16)):
        for compile_what in (None, "model", "step"):
            name = f"batch {batch} {'bf16' if dtype else 'fp32'}, compiled: {compile_what or 'no'}"
            try:
                rate, wall, busy = measure(cnn, batch, compile_what, dtype)
                graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]  # 0: nothing was compiled
                print(
                    f"{name}: {rate:,.0f} samples/s; per step: wall {wall:,.0f} µs, GPU kernels {busy:,.0f} µs; "
                    f"compiled graphs {graphs}"
                )
            except Exception as error:  # one setting failing must not lose the others' figures
                print(f"{name}: failed: {type(error).__name__}: {str(error)[:300]}")
            torch.compiler.reset()  # the next setting compiles as a fresh process would
            torch._dynamo.utils.counters.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
