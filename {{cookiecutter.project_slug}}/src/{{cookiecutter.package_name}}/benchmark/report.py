"""Turn every rank's measurements into the figures, and print them."""

import statistics
from dataclasses import asdict, dataclass

# Compared where both ran (--ways): Lightning against each plain way, and what compiling the
# plain loop's whole step buys over compiling its model alone.
COMPARED = (("lightning", "plain"), ("lightning", "plain-step"), ("plain-step", "plain"))


@dataclass
class WayFigures:
    samples_per_sec: list[float]  # per repeat, summed over all processes
    samples_per_cpu_sec: list[float]  # per repeat: all samples / all processes' CPU seconds
    peak_memory_mib: float  # the largest of any process and repeat

    @property
    def median(self) -> float:
        return statistics.median(self.samples_per_sec)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.samples_per_cpu_sec)


@dataclass
class Figures:
    settings: dict
    ways: dict[str, WayFigures]
    loader_samples_per_sec: float  # summed over all processes

    @classmethod
    def from_ranks(cls, ranks: list[dict], ways: list[str], settings: dict) -> "Figures":
        figures = {}
        for way in ways:
            repeats = zip(*(rank["runs"][way] for rank in ranks), strict=True)
            totals, per_cpu = [], []
            for measured in repeats:
                totals.append(sum(m["samples_per_sec"] for m in measured))
                # Every process did the same number of samples: all of them / all CPU seconds.
                per_cpu.append(len(measured) / sum(1 / m["samples_per_cpu_sec"] for m in measured))
            peak = max(m["peak_memory_mib"] for rank in ranks for m in rank["runs"][way])
            figures[way] = WayFigures(totals, per_cpu, peak)
        return cls(settings, figures, sum(rank["loader"] for rank in ranks))

    def pairs(self) -> list[tuple[str, str]]:
        """The ways compared, (first, second) for first / second, of those that ran."""
        return [pair for pair in COMPARED if set(pair) <= set(self.ways)]

    def ratios(self, first: str, second: str, per: str = "samples_per_sec") -> list[float]:
        """first / second, per repeat: each pair ran back to back under the same machine load."""
        ones, others = getattr(self.ways[first], per), getattr(self.ways[second], per)
        return [one / other for one, other in zip(ones, others, strict=True)]

    @property
    def training_samples_per_sec(self) -> float:
        return max(way.median for way in self.ways.values())

    def as_dict(self) -> dict:
        result = {"settings": self.settings, "loader_samples_per_sec": self.loader_samples_per_sec}
        result["ways"] = {
            name: {**asdict(way), "median": way.median, "cpu_median": way.cpu_median} for name, way in self.ways.items()
        }
        if ("lightning", "plain") in self.pairs():
            result["ratio_median"] = statistics.median(self.ratios("lightning", "plain"))
            result["cpu_ratio_median"] = statistics.median(self.ratios("lightning", "plain", "samples_per_cpu_sec"))
        result["ratio_medians"] = {f"{a}/{b}": statistics.median(self.ratios(a, b)) for a, b in self.pairs()}
        return result


def print_report(figures: Figures) -> None:
    s = figures.settings
    print(
        f"\nbenchmark: {s['model']} on {s['data']}, batch {s['batch_size_per_process']} per process, "
        f"precision {s['precision']}, compiled: {s.get('compile', 'no')}, "
        f"{s['processes']} process(es) x {s['threads_per_process']} thread(s) on {s['device']}\n"
        f"           {s['steps']} timed steps after {s['warmup']} warm-up, {s['repeats']} interleaved repeats; "
        f"{s['versions']}"
    )
    print(f"{'way':<10} {'samples/s':>11} {'min':>11} {'max':>11} {'per CPU-s':>11} {'peak MiB':>9}")
    for name, way in figures.ways.items():
        low, high = min(way.samples_per_sec), max(way.samples_per_sec)
        print(
            f"{name:<10} {way.median:>11.1f} {low:>11.1f} {high:>11.1f} {way.cpu_median:>11.1f} "
            f"{way.peak_memory_mib:>9.0f}"
        )
    for first, second in figures.pairs():
        for label, per in (("ratio", "samples_per_sec"), ("cpu-time ratio", "samples_per_cpu_sec")):
            ratios = figures.ratios(first, second, per)
            print(
                f"{label} {first}/{second}: {statistics.median(ratios):.3f} "
                f"(median of {len(ratios)} paired repeats; min {min(ratios):.3f}, max {max(ratios):.3f})"
            )
    loader = figures.loader_samples_per_sec
    print(
        f"loader only: {loader:.1f} samples/s = {loader / figures.training_samples_per_sec:.1f}x what training uses "
        f"({s['loader_workers_per_process']} worker(s) per process)"
    )
