"""The seed's comparison table for any two devices or machines, from stored runs.

Two figures per workflow: the seed's "speedup", the time saved relative to the
slower side, (t_old - t_new) / t_old in percent; and the plain ratio
t_old / t_new, which is what most readers mean by "1.5x faster".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .runs import BenchmarkRun
from .stats import summarize

REFERENCE_FILE = Path(__file__).with_name("reference_runs.json")
STATISTICS = ("median", "mean", "p95", "min")


def speedup_pct(t_old: float, t_new: float) -> float:
    """Time saved by the new side, in percent of the old time (the seed's definition)."""
    return (t_old - t_new) / t_old * 100.0


def ratio(t_old: float, t_new: float) -> float:
    """How many times faster the new side is (t_old / t_new)."""
    return t_old / t_new


@dataclass(frozen=True)
class Side:
    """One column of the table: runs on this device, on this host (machine) if given."""

    device: str
    host: str | None = None

    def matches(self, run) -> bool:
        return run.device == self.device and (self.host is None or run.host == self.host)

    @property
    def label(self) -> str:
        return f"{self.device} ({self.host})" if self.host else self.device


@dataclass(frozen=True)
class Row:
    workflow: str
    old_s: float
    new_s: float

    @property
    def speedup_pct(self) -> float:
        return speedup_pct(self.old_s, self.new_s)

    @property
    def ratio(self) -> float:
        return ratio(self.old_s, self.new_s)


@dataclass(frozen=True)
class Table:
    old: Side
    new: Side
    rows: tuple[Row, ...]
    statistic: str = "median"


def run_seconds(run: BenchmarkRun, statistic: str = "median") -> float:
    """One number for a run: a statistic of its wall times."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}")
    value = (run.stats or {}).get(statistic)
    return value if value is not None else getattr(summarize(run.wall_s), statistic)


def build_table(runs: Iterable[BenchmarkRun], old: Side, new: Side,
                statistic: str = "median") -> Table:
    """Rows for each workflow both sides ran, from each side's latest run of it."""
    latest: dict[tuple[int, str], BenchmarkRun] = {}
    order: list[str] = []
    for run in runs:
        for index, side in enumerate((old, new)):
            if not side.matches(run):
                continue
            key = (index, run.workflow)
            known = latest.get(key)
            if known is None or _newer(run, known):
                latest[key] = run
            if run.workflow not in order:
                order.append(run.workflow)
    rows = tuple(Row(name, run_seconds(latest[0, name], statistic), run_seconds(latest[1, name], statistic))
                 for name in order if (0, name) in latest and (1, name) in latest)
    return Table(old, new, rows, statistic)


def _newer(run: BenchmarkRun, other: BenchmarkRun) -> bool:
    """Whether ``run`` replaces ``other``: a stored run beats a reference (unstored) one;
    the later stored run wins, and among reference runs the one listed later."""
    if run.created_at is None or other.created_at is None:
        return other.created_at is None
    return run.created_at > other.created_at


def reference_data() -> dict:
    return json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))


def reference_runs() -> list[BenchmarkRun]:
    """The seed's published times as runs, so they can sit beside stored runs in a table."""
    data = reference_data()
    runs = []
    for entry in data["workflows"]:
        for side, key in (("old", "old_s"), ("new", "new_s")):
            seconds = entry[key]
            runs.append(BenchmarkRun(
                workflow=entry["workflow"], device=data[side]["device"], host=data[side]["host"],
                comfyui_version="unknown", torch_version="unknown", repeats=1, warmup=0,
                wall_s=[seconds], stats=summarize([seconds]).as_dict(), per_node={},
                peak_memory_bytes=None,
                extra={"reference": True, "template": entry["template"],
                       "published_speedup_pct": entry["published_speedup_pct"]}))
    return runs


def reference_table() -> Table:
    data = reference_data()
    return build_table(reference_runs(), Side(**data["old"]), Side(**data["new"]))


def to_text(table: Table) -> str:
    """A fixed-width table for a chat message or a log."""
    header = ("workflow", "old s", "new s", "saved", "ratio")
    body = [(row.workflow, f"{row.old_s:.2f}", f"{row.new_s:.2f}", f"{row.speedup_pct:.1f} %",
             f"{row.ratio:.2f}x") for row in table.rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    def fmt(line):
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                         for i, (cell, w) in enumerate(zip(line, widths, strict=True)))
    legend = [f"old: {table.old.label}", f"new: {table.new.label}",
              f"{table.statistic} seconds per run; saved = (old - new) / old; ratio = old / new"]
    return "\n".join(legend + ["", fmt(header)] + [fmt(line) for line in body])
