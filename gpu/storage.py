"""Benchmark runs in PostgreSQL, through the store's ``benchmarks`` queries."""

from __future__ import annotations

from .runs import BenchmarkRun


async def save_run(db, run: BenchmarkRun):
    """Insert ``run``; returns the stored row (with ``id`` and ``created_at``)."""
    from ..store import benchmarks

    return await benchmarks.add_benchmark_run(
        db, workflow=run.workflow, device=run.device, host=run.host, wall_s=run.wall_s,
        warmup=run.warmup, comfyui_version=run.comfyui_version, torch_version=run.torch_version,
        stats=run.stats, per_node=run.per_node, peak_memory_bytes=run.peak_memory_bytes,
        extra=run.extra)


async def load_runs(db, workflow: str | None = None, limit: int = 200) -> list:
    """Stored runs, newest first; rows have the fields of ``BenchmarkRun``."""
    from ..store import benchmarks

    return await benchmarks.list_benchmark_runs(db, workflow=workflow, limit=limit)
