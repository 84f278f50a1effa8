"""A bar chart of the top kernels (time), with achieved GFLOP/s against the measured peak."""
from __future__ import annotations

from ..errors import ProfileError


def plot_kernels(prof, path: str, top: int = 10) -> str:
    """Write a PNG (or any format matplotlib knows by the extension) to ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never needs a display
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ProfileError("plotting needs matplotlib: pip install matplotlib "
                           "(or pip install 'ember[plot]')") from e
    rows = prof.select(sort="time", top=top)
    labels = [f"#{r.index} {r.nodes if len(r.nodes) <= 28 else r.nodes[:25] + '...'} ({r.ops})" for r in rows]
    fig, (ax_t, ax_g) = plt.subplots(1, 2, figsize=(13, 0.45 * len(rows) + 1.8), sharey=True)
    y = range(len(rows))
    ax_t.barh(y, [r.total / r.calls * 1e3 for r in rows], color="#d95f02")
    ax_t.set_yticks(list(y), labels, fontsize=8)
    ax_t.invert_yaxis()
    ax_t.set_xlabel("mean time per call (ms)")
    ax_t.set_title(f"top {len(rows)} kernels of {prof.model} by time")
    ax_g.barh(y, [r.gflops for r in rows], color="#1b9e77")
    ax_g.axvline(prof.peak_gflops, color="black", linestyle="--", linewidth=1)
    ax_g.text(prof.peak_gflops, -0.6, f" peak {prof.peak_gflops:.0f}", fontsize=8, va="bottom")
    ax_g.set_xlabel("achieved GFLOP/s")
    ax_g.set_xlim(0, prof.peak_gflops * 1.1)
    fig.text(0.01, 0.01, prof.summary(), fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["plot_kernels"]
