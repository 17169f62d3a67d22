"""HTTP latency vs load: 1 worker, 1..64 lock-step clients; rate and p99 per client count, for
notes-server, the SDK peer and the floor, as a table and a PNG next to the latency plot."""

from __future__ import annotations

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
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    clients = [p[0] for p in next(iter(curve.values()))]
    for impl, points in curve.items():
        xs = [p[0] for p in points]
        left.plot(xs, [p[1] for p in points], marker="o", label=LABELS[impl])
        right.plot(xs, [p[2] for p in points], marker="o", label=LABELS[impl])
    for ax, title in ((left, "requests/s (higher is better)"), (right, "p99 ms (lower is better)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients, [str(c) for c in clients])
        ax.set_xlabel("lock-step clients")
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
    right.set_yscale("log")
    left.legend(fontsize=8)
    fig.suptitle("HTTP notes_read, 1 worker: latency vs load", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
