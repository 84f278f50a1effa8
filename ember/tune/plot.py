"""Tuning curves as a picture (matplotlib): estimated latency over time, best per task."""
from __future__ import annotations

__all__ = ["plot_curve"]


def plot_curve(report, path: str, others: dict = None) -> str:
    """The model's estimated latency over tuning time (``others``: more curves by label, e.g.
    the same tuning without transfer); returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    curves = {"tuning": report.curve, **(others or {})}
    for label, curve in curves.items():
        ax.step([t / 60 for t, _ in curve], [lat * 1e3 for _, lat in curve], where="post", label=label)
    ax.set_xlabel("tuning time (min)")
    ax.set_ylabel("estimated latency (ms)")
    ax.set_title(f"ember tune: {report.model.rsplit('/', 1)[-1]}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
