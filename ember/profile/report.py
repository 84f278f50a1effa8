"""Profiles as tables: rich when it is installed (it is a dependency), plain text otherwise."""
from __future__ import annotations

import io
from typing import Optional, Sequence


def render(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "",
           width: int = 160, right: Sequence[int] = (), nowrap: Sequence[int] = ()) -> str:
    """A table as text: ``right`` lists the columns aligned right (numbers), ``nowrap`` those
    never folded over lines (names people copy, such as kernel names)."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a dependency; a plain table still works
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
        fmt = lambda cells: "  ".join(c.rjust(w) if i in right else c.ljust(w)  # noqa: E731
                                      for i, (c, w) in enumerate(zip(cells, widths)))
        return "\n".join([title, fmt(headers), *map(fmt, rows), caption]).rstrip() + "\n"
    t = Table(title=title, caption=caption or None, caption_justify="left")
    for i, h in enumerate(headers):
        t.add_column(h, justify="right" if i in right else "left", overflow="fold",
                     no_wrap=i in nowrap)
    for r in rows:
        t.add_row(*r)
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(t)
    return console.export_text()


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f}"


def _us(s: float) -> str:
    return f"{s * 1e6:.1f}"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def kernel_table(prof, sort: str = "time", top: Optional[int] = None, group_by: str = "call",
                 width: int = 160) -> str:
    """The per-kernel profile as a table, with the summary line as its caption."""
    rows = prof.select(sort=sort, top=top, group_by=group_by)
    headers = ["#", "kernel", "nodes", "calls", "total ms", "median us", "min us", "%", "MFLOP",
               "MB", "GFLOP/s", "GB/s", "% peak"]
    cells = []
    for r in rows:
        cells.append([str(r.index) if group_by == "call" else "", r.kernel, _short(r.nodes or r.ops, 48),
                      str(r.calls), _ms(r.total), _us(r.typical), _us(r.min), f"{r.percent:.1f}",
                      f"{r.flops / 1e6:.1f}", f"{r.bytes / 1e6:.2f}", f"{r.gflops:.1f}", f"{r.gbps:.1f}",
                      f"{r.percent_of_peak:.1f}"])
    shown = f"top {len(rows)} of {len(prof.select(group_by=group_by))}" if top else f"{len(rows)} rows"
    title = f"Ember kernel profile: {prof.model} ({shown}, by {sort}, one row per {group_by})"
    return render(title, headers, cells, caption=prof.summary(), width=width,
                  right=range(3, len(headers)), nowrap=(1,))


__all__ = ["kernel_table", "render"]
