"""What ``/compare`` and ``GET /courier/benchmarks/compare[.png]`` show.

A table of two sides built from stored runs (``compare.build_table``: each side's latest run
per workflow), then the seed's published rows (RTX 4090 vs RTX 5090) as reference rows,
labelled so: they were not measured here and never mix with stored runs.

A side is written ``<device>[@host]``. Device names may contain ``@`` themselves (Intel CPUs:
"Intel(R) Xeon(R) CPU @ 2.20GHz"), so a name that is a known device as a whole is a device;
otherwise the text after the last ``@`` is the host.
"""

from __future__ import annotations

import io
import itertools
import unicodedata
from collections.abc import Iterable
from datetime import datetime, timezone

from PIL import Image, ImageDraw, ImageFont

from .compare import (
    STATISTICS,
    Row,
    Side,
    Table,
    build_table,
    reference_data,
    reference_runs,
    run_seconds,
)
from .report import comparison_chart

MAX_SIDE_CHARS = 256
REFERENCE_TAG = "REFERENCE · the seed's published times, not measured here"
BANNER_HEIGHT = 36  # the strip above the reference chart that says so
BANNER = (255, 236, 236)
TAG = (201, 42, 42)
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


class BadSide(ValueError):
    """A side that cannot name a device (empty, too long, control characters)."""


def check_text(name: str, text: str, limit: int = MAX_SIDE_CHARS) -> str:
    """``text`` stripped; BadSide if it is empty, longer than ``limit`` or has control characters."""
    text = text.strip()
    if not text:
        raise BadSide(f"{name!r} is empty")
    if len(text) > limit:
        raise BadSide(f"{name!r} is longer than {limit} characters")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in text):
        raise BadSide(f"{name!r} contains control or unassigned characters")
    return text


def parse_side(text: str, known_devices: Iterable[str] = (), name: str = "side") -> Side:
    """``<device>[@host]`` as a Side (see the module docstring for ``@`` in device names)."""
    text = check_text(name, text)
    if text in set(known_devices) or "@" not in text:
        return Side(text)
    device, _, host = text.rpartition("@")
    device, host = device.strip(), host.strip()
    if not device or not host:
        raise BadSide(f"{name!r} must be <device> or <device>@<host>")
    return Side(device, host)


def _stamp(run) -> datetime:
    return run.created_at or _EPOCH


def _latest_per_workflow(runs: Iterable) -> dict[Side, dict[str, object]]:
    """Per (device, host): the latest run of each workflow."""
    groups: dict[Side, dict[str, object]] = {}
    for run in runs:
        side = groups.setdefault(Side(run.device, run.host), {})
        known = side.get(run.workflow)
        if known is None or _stamp(run) > _stamp(known):
            side[run.workflow] = run
    return groups


def sides_of(runs: Iterable) -> list[dict]:
    """The (device, host) pairs of ``runs``, most recently run first, with their workflows."""
    groups = _latest_per_workflow(runs)
    listed = [{"device": side.device, "host": side.host, "label": side.label,
               "workflows": sorted(latest), "latest": max(_stamp(r) for r in latest.values())}
              for side, latest in groups.items()]
    listed.sort(key=lambda entry: entry["latest"], reverse=True)
    for entry in listed:
        entry["latest"] = None if entry["latest"] == _EPOCH else entry["latest"]
    return listed


def pick_sides(runs: Iterable, statistic: str = "median") -> tuple[Side, Side] | None:
    """Two sides to compare when none are given: the pair sharing the most workflows (then the pair
    whose less recent side ran last); the slower of the two on what they share is ``old``. None with
    fewer than two sides."""
    groups = _latest_per_workflow(runs)
    if len(groups) < 2:
        return None

    def score(pair):
        a, b = pair
        shared = groups[a].keys() & groups[b].keys()
        recent = min(max(_stamp(r) for r in groups[side].values()) for side in pair)  # both sides recent
        return len(shared), recent, pair[0].label, pair[1].label

    a, b = max(itertools.combinations(groups, 2), key=score)
    shared = sorted(groups[a].keys() & groups[b].keys())
    total_a = sum(run_seconds(groups[a][w], statistic) for w in shared)
    total_b = sum(run_seconds(groups[b][w], statistic) for w in shared)
    return (a, b) if total_a >= total_b else (b, a)


def reference_table(workflow: str | None = None, statistic: str = "median") -> Table | None:
    """The seed's rows (all, or the one named ``workflow``); None when none is left."""
    data = reference_data()
    table = build_table(reference_runs(), Side(**data["old"]), Side(**data["new"]), statistic)
    rows = tuple(row for row in table.rows if workflow is None or row.workflow == workflow)
    return Table(table.old, table.new, rows, statistic) if rows else None


def reference_devices() -> set[str]:
    data = reference_data()
    return {data["old"]["device"], data["new"]["device"]}


def row_json(row: Row, table: Table, reference: bool) -> dict:
    """One row: t_old/t_new in seconds, speedup_pct the seed's way ((old - new) / old), ratio old/new."""
    entry = {"workflow": row.workflow, "old": table.old.label, "new": table.new.label,
             "t_old": row.old_s, "t_new": row.new_s, "speedup_pct": row.speedup_pct, "ratio": row.ratio,
             "reference": reference}
    if reference:
        published = {w["workflow"]: w["published_speedup_pct"] for w in reference_data()["workflows"]}
        entry["published_speedup_pct"] = published.get(row.workflow)
    return entry


def side_json(side: Side) -> dict:
    return {"device": side.device, "host": side.host, "label": side.label}


def comparison(runs: list, old: Side, new: Side, *, workflow: str | None = None,
               statistic: str = "median") -> tuple[dict, Table, Table | None]:
    """(the JSON reply, the stored table, the reference table) for two sides."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}")
    runs = [run for run in runs if workflow is None or run.workflow == workflow]
    table = build_table(runs, old, new, statistic)
    reference = reference_table(workflow, statistic)
    rows = [row_json(row, table, False) for row in table.rows]
    if reference is not None:
        rows += [row_json(row, reference, True) for row in reference.rows]
    reply = {"old": side_json(old), "new": side_json(new), "statistic": statistic, "workflow": workflow,
             "rows": rows, "reference_source": reference_data()["source"] if reference else None,
             "sides": sides_of(runs)}
    return reply, table, reference


def chart_png(table: Table | None, reference: Table | None) -> bytes:
    """The comparison chart of ``table`` above the reference chart (under a banner that says so), as PNG."""
    panels = []
    if table is not None:
        panels.append(comparison_chart(table))
    if reference is not None:
        chart = comparison_chart(reference)
        banner = Image.new("RGB", (chart.width, BANNER_HEIGHT), BANNER)
        ImageDraw.Draw(banner).text((24, BANNER_HEIGHT // 2), REFERENCE_TAG, font=ImageFont.load_default(size=16),
                                    fill=TAG, anchor="lm")
        panels += [banner, chart]
    if not panels:
        raise ValueError("nothing to draw")
    image = Image.new("RGB", (max(p.width for p in panels), sum(p.height for p in panels)), (255, 255, 255))
    y = 0
    for panel in panels:
        image.paste(panel, (0, y))
        y += panel.height
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
