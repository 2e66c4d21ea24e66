"""The stored form of a benchmark: one row per session, built from its measured runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

from .recorder import RunResult
from .session import Session
from .stats import summarize


@dataclass
class BenchmarkRun:
    workflow: str
    device: str
    host: str
    comfyui_version: str
    torch_version: str
    repeats: int
    warmup: int
    wall_s: list[float]
    stats: dict
    per_node: dict[str, dict]  # node id -> timings; see slowest_nodes() for an order
    peak_memory_bytes: int | None
    extra: dict = field(default_factory=dict)
    id: int | None = None
    created_at: datetime | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def aggregate_nodes(results: list[RunResult]) -> dict[str, dict]:
    """Per node over the runs: mean and median seconds, share of the mean total, it/s.

    Node times are host-side: a GPU kernel queued by one node and waited for by
    the next is billed to the one that waits.
    """
    if not results:
        return {}
    mean_total = sum(r.total_s for r in results) / len(results)
    grouped: dict[str, list] = {}
    for result in results:
        for node in result.nodes:
            grouped.setdefault(node.node_id, []).append(node)
    rows = {}
    for node_id, times in grouped.items():
        seconds = summarize([t.seconds for t in times])
        rates = [t.it_per_s for t in times if t.it_per_s is not None]
        rows[node_id] = {
            "node_id": node_id,
            "class_type": times[0].class_type,
            "title": times[0].title,
            "runs": len(times),
            "mean_s": seconds.mean,
            "median_s": seconds.median,
            "share": seconds.mean / mean_total if mean_total > 0 else 0.0,
            "steps": max(t.steps for t in times),
            "it_per_s": sum(rates) / len(rates) if rates else None,
        }
    return rows


def slowest_nodes(per_node: dict[str, dict]) -> list[dict]:
    return sorted(per_node.values(), key=lambda row: row["mean_s"], reverse=True)


def build_run(session: Session, device: str, versions: dict) -> BenchmarkRun:
    """The row for a finished session; ``device`` names what the runs computed on."""
    measured = session.measured()
    if not measured:
        raise ValueError("no measured run of this benchmark finished (they failed or were interrupted)")
    wall = [r.total_s for r in measured]
    peaks = [r.peak_memory_bytes for r in measured if r.peak_memory_bytes is not None]
    return BenchmarkRun(
        workflow=session.workflow,
        device=device,
        host=session.host,
        comfyui_version=versions.get("comfyui", "unknown"),
        torch_version=versions.get("torch", "unknown"),
        repeats=len(wall),
        warmup=session.warmup,
        wall_s=wall,
        stats=summarize(wall).as_dict(),
        per_node=aggregate_nodes(measured),
        peak_memory_bytes=max(peaks) if peaks else None,
        extra={
            "session": session.id,
            "memory_kind": measured[-1].memory_kind,
            "devices": list(dict.fromkeys(d for r in measured for d in r.devices)),
            "python": versions.get("python", ""),
            "missing_runs": session.missing(),
            "cached_nodes": sorted({n for r in measured for n in r.cached}),
            "untimed_nodes": sorted({n for r in measured for n in r.ran_before}),
            "prompt_ids": [r.prompt_id for r in measured],
        },
    )
