"""A pytest plugin for tools/gpu-figures.sh: every test's result as it comes, and each failure's
report, in $GPU_FIGURES_LOGS. A suite stopped by the device call's time limit still tells which
tests failed and why, and how long each took (to plan the next call)."""

import os


def pytest_runtest_logreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER") or not (report.when == "call" or report.outcome != "passed"):
        return  # the controller records each test once: its call, or the phase that did not pass
    logs = os.environ["GPU_FIGURES_LOGS"]
    with open(f"{logs}/test-results.txt", "a") as results:
        results.write(f"{report.outcome} {report.duration:.1f} {report.nodeid}\n")
    if report.failed:
        with open(f"{logs}/test-failures.txt", "a") as failures:
            failures.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
