"""A pytest plugin for tools/gpu-figures.sh: every test's result as it comes, and each failure's
report, in $GPU_FIGURES_LOGS. A suite stopped by the device call's time limit still tells which
tests failed and why, and how long each took (to plan the next call). With GPU_FIGURES_REST=1
the tests that have a result there already are left out: a suite longer than one call runs
on in the next call on the same machine."""

import os

# Whether this process is a pytest-xdist worker: then its controller records its tests. From its
# config, not from PYTEST_XDIST_WORKER, which a suite started by a worker's test inherits.
_worker = False


def pytest_configure(config):
    global _worker
    _worker = hasattr(config, "workerinput")


def pytest_collection_modifyitems(config, items):
    results = f"{os.environ['GPU_FIGURES_LOGS']}/test-results.txt"
    if os.environ.get("GPU_FIGURES_REST") != "1" or not os.path.exists(results):
        return
    with open(results) as recorded:
        done = {line.rstrip("\n").split(" ", 2)[2] for line in recorded if line.count(" ") >= 2}
    kept = [item for item in items if item.nodeid not in done]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
    items[:] = kept


def pytest_runtest_logreport(report):
    if _worker or not (report.when == "call" or report.outcome != "passed"):
        return  # the controller records each test once: its call, or the phase that did not pass
    logs = os.environ["GPU_FIGURES_LOGS"]
    with open(f"{logs}/test-results.txt", "a") as results:
        results.write(f"{report.outcome} {report.duration:.1f} {report.nodeid}\n")
    if report.failed:
        with open(f"{logs}/test-failures.txt", "a") as failures:
            failures.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
