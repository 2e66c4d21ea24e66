"""Benchmark runs: wall times per repeat and their statistics, per workflow, device and host."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .db import Db, Queries, acquire

query = Queries(__name__)


@dataclass(frozen=True)
class BenchmarkRun:
    id: int
    created_at: datetime
    workflow: str
    device: str
    host: str
    comfyui_version: str | None
    torch_version: str | None
    repeats: int
    warmup: int
    wall_s: list[float]
    stats: dict[str, Any]
    per_node: dict[str, Any]
    peak_memory_bytes: int | None
    extra: dict[str, Any]


async def add_benchmark_run(db: Db, *, workflow: str, device: str, wall_s: list[float],
                            warmup: int = 0, host: str = "", comfyui_version: str | None = None,
                            torch_version: str | None = None, stats: dict[str, Any] | None = None,
                            per_node: dict[str, Any] | None = None,
                            peak_memory_bytes: int | None = None,
                            extra: dict[str, Any] | None = None) -> BenchmarkRun:
    """Store one run; ``repeats`` is ``len(wall_s)``."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(*query.bind(
            "insert_benchmark_run", workflow=workflow, device=device, host=host, comfyui_version=comfyui_version,
            torch_version=torch_version, repeats=len(wall_s), warmup=warmup, wall_s=wall_s, stats=stats or {},
            per_node=per_node or {}, peak_memory_bytes=peak_memory_bytes, extra=extra or {}))
    return BenchmarkRun(**row)


async def get_benchmark_run(db: Db, run_id: int) -> BenchmarkRun | None:
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("get_benchmark_run"), run_id)
    return None if row is None else BenchmarkRun(**row)


async def list_benchmark_runs(db: Db, *, workflow: str | None = None, limit: int = 50) -> list[BenchmarkRun]:
    """Newest first."""
    async with acquire(db) as conn:
        rows = await conn.fetch(query("list_benchmark_runs"), workflow, limit)
    return [BenchmarkRun(**row) for row in rows]
