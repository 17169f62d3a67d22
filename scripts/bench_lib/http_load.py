"""HTTP latency vs load: 1 worker, 1..64 lock-step clients; rate and p99 per client count, for
notes-server, the SDK peer and the floor, as a table and a PNG next to the latency plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench_lib.common import OURS, PEER, log, percentile
from bench_lib.http_servers import FLOOR, HttpServer, load
from bench_lib.results import Results, fmt

TITLE = "HTTP latency vs load (`notes_read`, 1 worker, one trial per point)"
LABELS = {OURS: "notes-server", PEER: "SDK peer", FLOOR: "floor (minimal ASGI app)"}


def run(
    results: Results,
    servers: dict[str, HttpServer],
    body_file: Path,
    clients: list[int],
    seconds: float,
) -> None:
    curve: dict[str, list[tuple[int, float, float]]] = {impl: [] for impl in servers}
    for count in clients:
        log(f"HTTP load curve: {count} clients")
        for impl, server in servers.items():
            rate, latencies, _cpu = load(server, body_file, count, seconds)
            curve[impl].append((count, rate, percentile(latencies, 99) / 1000))
    results.raw["http_load"] = curve
    header = ["clients", *[f"{LABELS[i]} req/s / p99 ms" for i in servers]]
    rows = []
    for n, count in enumerate(clients):
        rows.append(
            [str(count), *[f"{fmt(curve[i][n][1])} / {fmt(curve[i][n][2])}" for i in servers]]
        )
    results.tables[TITLE] = (header, rows)


def write_plot(results: Results, path: Path) -> bool:
    """Rate and p99 against the number of clients; False without data or matplotlib."""
    curve = results.raw.get("http_load")
    if not curve:
        return False
    series = {
        impl: [(count, {"rate": rate, "p99": p99}) for count, rate, p99 in points]
        for impl, points in curve.items()
    }
    panels = (
        ("rate", "requests/s (higher is better)", False),
        ("p99", "p99 ms (lower is better)", True),
    )
    title = "HTTP notes_read, 1 worker: latency vs load"
    return plot_against_clients(path, series, LABELS, panels, "lock-step clients", title)


def plot_against_clients(
    path: Path,
    series: dict[str, list[tuple[int, dict[str, float]]]],
    labels: dict[str, str],
    panels: Sequence[tuple[str, str, bool]],
    xlabel: str,
    title: str,
) -> bool:
    """One panel per (key, title, log scale) of `panels`, each implementation's points of that
    key against the client count (log 2); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter, ScalarFormatter
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels) + 3, 3.3))
    clients = [count for count, _ in next(iter(series.values()))]
    for ax, (key, panel_title, log_scale) in zip(axes, panels, strict=True):
        for impl, points in series.items():
            xs = [count for count, _ in points]
            ax.plot(xs, [p[key] for _, p in points], marker="o", label=labels[impl])
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients, [str(c) for c in clients])
        ax.set_xlabel(xlabel)
        ax.set_title(panel_title, fontsize=9)
        ax.grid(True, alpha=0.3)
        if log_scale:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
