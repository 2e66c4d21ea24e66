"""Benchmark results as text and as charts (Pillow only; no plotting library)."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from .compare import Table
from .runs import BenchmarkRun, slowest_nodes

WIDTH, HEIGHT = 960, 540
BACKGROUND = (255, 255, 255)
INK = (33, 37, 41)
GRID = (222, 226, 230)
MUTED = (134, 142, 150)
OLD = (173, 181, 189)
NEW = (34, 139, 230)
MAX_NODE_BARS = 8
MAX_NODE_LINES = 20


def format_bytes(count: int | None) -> str:
    if count is None:
        return "unknown"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def memory_label(run: BenchmarkRun) -> str:
    return "peak VRAM" if run.extra.get("memory_kind") == "cuda" else "peak RSS"


def benchmark_report(run: BenchmarkRun) -> str:
    """The STRING output of the Benchmark node."""
    s = run.stats
    lines = [
        f"Benchmark: {run.workflow}",
        f"device: {run.device} · host: {run.host}",
        f"ComfyUI {run.comfyui_version} · torch {run.torch_version} · "
        f"{s['n']} measured run{'s' if s['n'] != 1 else ''} after {run.warmup} warm-up",
        f"wall time: mean {s['mean']:.3f} s · median {s['median']:.3f} s · p95 {s['p95']:.3f} s "
        f"· min {s['min']:.3f} s · max {s['max']:.3f} s",
        f"{memory_label(run)}: {format_bytes(run.peak_memory_bytes)}",
    ]
    missing = run.extra.get("missing_runs")
    if missing:
        lines.append(f"runs that did not finish (failed or interrupted): {', '.join(map(str, missing))}")
    if run.extra.get("untimed_nodes"):
        lines.append("ran before the Benchmark node, not timed: " + ", ".join(run.extra["untimed_nodes"]))
    lines.append("")
    lines.append("nodes (mean per run, slowest first):")
    nodes = slowest_nodes(run.per_node)
    for node in nodes[:MAX_NODE_LINES]:
        rate = f" · {node['it_per_s']:.2f} it/s" if node.get("it_per_s") else ""
        lines.append(f"  #{node['node_id']} {node['title']}: {node['mean_s']:.3f} s "
                     f"({node['share'] * 100:.1f} %){rate}")
    if len(nodes) > MAX_NODE_LINES:
        lines.append(f"  … and {len(nodes) - MAX_NODE_LINES} faster nodes")
    lines.append("")
    lines.append("runs (s): " + ", ".join(f"{t:.3f}" for t in run.wall_s))
    return "\n".join(lines)


def _font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def benchmark_chart(run: BenchmarkRun) -> Image.Image:
    """Run times (bars, median line) on the left; the slowest nodes on the right."""
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    s = run.stats
    draw.text((24, 16), f"{run.workflow} · {run.device}", font=_font(22), fill=INK)
    draw.text((24, 48), f"median {s['median']:.3f} s · mean {s['mean']:.3f} s · p95 {s['p95']:.3f} s · "
                        f"{s['n']} runs · {memory_label(run)} {format_bytes(run.peak_memory_bytes)}",
              font=_font(15), fill=MUTED)
    _run_bars(draw, run.wall_s, s["median"], (24, 96, 440, HEIGHT - 40))
    _node_bars(draw, slowest_nodes(run.per_node)[:MAX_NODE_BARS], (480, 96, WIDTH - 24, HEIGHT - 40))
    return image


def _run_bars(draw, values, median, box) -> None:
    left, top, right, bottom = box
    font = _font(12)
    draw.text((left, top - 22), "wall time per run (s) · line: median", font=_font(14), fill=INK)
    axis_top = max(values) * 1.15 or 1.0  # headroom for the labels
    plot_left = left + 44
    for fraction in (0, 0.25, 0.5, 0.75, 1):
        y = bottom - (bottom - top) * fraction
        draw.line((plot_left, y, right, y), fill=GRID)
        draw.text((plot_left - 6, y), f"{axis_top * fraction:.2f}", font=font, fill=MUTED, anchor="rm")
    slot = (right - plot_left) / len(values)
    for index, value in enumerate(values):
        x0 = plot_left + slot * index + slot * 0.15
        x1 = plot_left + slot * (index + 1) - slot * 0.15
        y = bottom - (bottom - top) * value / axis_top
        draw.rectangle((x0, y, x1, bottom), fill=NEW)
        if len(values) <= 12:
            draw.text(((x0 + x1) / 2, y - 4), f"{value:.2f}", font=font, fill=INK, anchor="mb")
    y = bottom - (bottom - top) * median / axis_top
    draw.line((plot_left, y, right, y), fill=INK, width=2)


def _node_bars(draw, nodes, box) -> None:
    left, top, right, bottom = box
    draw.text((left, top - 22), "slowest nodes (mean s per run)", font=_font(14), fill=INK)
    if not nodes:
        draw.text((left, top + 8), "no node ran (all cached)", font=_font(14), fill=MUTED)
        return
    font = _font(13)
    longest = max(node["mean_s"] for node in nodes) or 1.0
    row = min(48, (bottom - top) / len(nodes))
    for index, node in enumerate(nodes):
        y = top + row * index
        label = f"#{node['node_id']} {node['title']}"
        draw.text((left, y), label[:48], font=font, fill=INK)
        bar_right = left + (right - left - 120) * node["mean_s"] / longest
        draw.rectangle((left, y + 18, max(left + 2, bar_right), y + row - 8), fill=NEW)
        rate = f" · {node['it_per_s']:.1f} it/s" if node.get("it_per_s") else ""
        draw.text((bar_right + 6, y + 18), f"{node['mean_s']:.3f} s{rate}", font=font, fill=MUTED)


def comparison_chart(table: Table) -> Image.Image:
    """Grouped bars per workflow (old, new seconds) with the time saved above each group."""
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((24, 16), f"{table.old.label}  vs  {table.new.label}", font=_font(20), fill=INK)
    draw.text((24, 46), f"{table.statistic} seconds per run · label: time saved (ratio)",
              font=_font(14), fill=MUTED)
    x = 24
    for name, colour in ((table.old.label, OLD), (table.new.label, NEW)):
        draw.rectangle((x, 68, x + 14, 82), fill=colour)
        draw.text((x + 20, 75), name, font=_font(13), fill=INK, anchor="lm")
        x += 20 + draw.textlength(name, font=_font(13)) + 24
    if not table.rows:
        draw.text((24, 120), "no workflow was run on both sides", font=_font(18), fill=MUTED)
        return image
    left, top, right, bottom = 70, 110, WIDTH - 24, HEIGHT - 70
    axis_top = max(max(r.old_s, r.new_s) for r in table.rows) * 1.2 or 1.0
    font = _font(12)
    for fraction in (0, 0.25, 0.5, 0.75, 1):
        y = bottom - (bottom - top) * fraction
        draw.line((left, y, right, y), fill=GRID)
        draw.text((left - 6, y), f"{axis_top * fraction:.1f}", font=font, fill=MUTED, anchor="rm")
    slot = (right - left) / len(table.rows)
    for index, row in enumerate(table.rows):
        x = left + slot * index
        bar = slot * 0.32
        for offset, seconds, colour in ((0.16, row.old_s, OLD), (0.52, row.new_s, NEW)):
            x0 = x + slot * offset
            y = bottom - (bottom - top) * seconds / axis_top
            draw.rectangle((x0, y, x0 + bar, bottom), fill=colour)
            draw.text((x0 + bar / 2, y - 3), f"{seconds:.2f}", font=font, fill=INK, anchor="mb")
        peak = bottom - (bottom - top) * max(row.old_s, row.new_s) / axis_top
        draw.text((x + slot / 2, peak - 20), f"{row.speedup_pct:.1f} % ({row.ratio:.2f}x)",
                  font=_font(13), fill=INK, anchor="mb")
        draw.text((x + slot / 2, bottom + 8), row.workflow[:22], font=font, fill=INK, anchor="mt")
    return image
