"""``offload="auto"``: offload a fused group only where its backend's kernel measured faster.

A backend may change the model's layout (oneDNN's kernels read blocks of one vector where
Ember's take two), so the choice is made in that layout and then checked against Ember alone:

1. the model with every group the available backends take offloaded (forced);
2. the same layout with none offloaded (Ember's kernels for the same groups);
3. each offloaded group's kernel time in (1) against its own kernel's in (2), from the kernel
   profiles of both (medians over the same runs): a group is offloaded where the backend's
   is faster;
4. the model with those groups offloaded, timed end to end against Ember alone (its own
   layout) and against (1): the fastest is returned, Ember alone unless another wins by more
   than ``MARGIN`` (a layout may win or lose more than its
   kernels do: MobileNetV2 ran 0.85x Ember's time with every conv on oneDNN, slower with the
   kernels chosen one by one).

The executable's ``offload_choices`` holds, per offloaded candidate, the backend, both
kernel times and the choice, and ``offload_summary`` the end-to-end times. The compiles reuse
each other's kernels from the cache; the measurements take a few seconds per model.

The choice is kept beside the kept executables (``<cache>/index/auto-<key>.json``, keyed as
they are: the file, the settings, this Ember): a later compile of the same file takes it
without measuring again, so every process runs the configuration the first one measured
(``offload_summary["kept"]``), and its compile is as quick as any other's. ``cache=False``
neither reads nor keeps it.
"""
from __future__ import annotations

import functools
import json
import os
import statistics
import tempfile

from ..options import CompileOptions
from ..profile.inputs import random_inputs
from ..profile.timing import interleaved

__all__ = ["auto_backends", "compile_auto", "pick_configuration"]

WARMUP, REPEAT, PASSES = 3, 15, 2
MARGIN = 0.03  # what an offloaded configuration must win by, end to end, in every pass


def _kernel_times(exe, feeds: dict) -> dict:
    """Kernel name -> median seconds per run (all its calls), from the kernel profile."""
    prof = exe.profile(**feeds, warmup=WARMUP, repeat=REPEAT)
    out: dict = {}
    for r in prof.rows:
        name = r.kernel.split(" [")[0]
        out[name] = out.get(name, 0.0) + r.median
    return out


def _kept_path(model, options: CompileOptions):
    """Where the choice for ``model`` (a file) with ``options`` is kept, or None (not a file,
    ``cache=False``)."""
    if not options.cache:
        return None
    from .compile import _compiled_before

    marker = _compiled_before(model, options)
    if marker is None:
        return None
    return os.path.join(os.path.dirname(marker), "auto-" + os.path.basename(marker)[len("model-"):] + ".json")


def _read_kept(path) -> dict | None:
    """The kept choice at ``path`` if it is whole and its backends are all available here."""
    from ..offload import get_backend

    try:
        with open(path) as f:
            kept = json.load(f)
        for b in kept["backends"]:
            get_backend(b)
        return kept
    except Exception:  # (missing, unreadable, or a backend this host no longer has: measure again)
        return None


def _keep(path: str, kept: dict) -> None:
    """Write the choice atomically (a reader sees all of it or none)."""
    fd, tmp = tempfile.mkstemp(prefix=".auto-", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        json.dump(kept, f)
    os.replace(tmp, path)


def auto_backends() -> list:
    """The backends ``offload="auto"`` measures on this host: every registered one that is
    available here but the example backend (``reference``, never faster)."""
    from ..offload import backend_names, get_backend

    names = []
    for n in backend_names():
        if n == "reference":
            continue
        try:
            get_backend(n)
            names.append(n)
        except Exception:  # (a backend this host lacks)
            continue
    return names


def compile_auto(model, options: CompileOptions):
    """``ember.compile(model, offload="auto")``: see the module docstring."""
    from .compile import compile_model

    kept_at = _kept_path(model, options)
    kept = _read_kept(kept_at) if kept_at else None
    if kept is not None:  # (a choice this Ember measured for this file and settings before)
        groups = kept["groups"]
        exe = compile_model(model, options=options.replace(
            offload=tuple(kept["backends"]), offload_groups=None if groups is None else frozenset(groups)))
        exe.offload_choices, exe.offload_summary = kept["choices"], {**kept["summary"], "kept": True}
        return exe

    names = auto_backends()
    base = options.replace(offload=(), offload_groups=None, wait=True)

    def done(exe, backends: list, groups, choices: dict, summary: dict):
        exe.offload_choices, exe.offload_summary = choices, summary
        if kept_at:
            _keep(kept_at, {"backends": backends, "groups": None if groups is None else sorted(groups),
                            "choices": choices, "summary": summary})
        return exe

    alone = compile_model(model, options=base)
    if not names:
        return done(alone, [], None, {}, {"backends": []})
    forced = compile_model(model, options=base.replace(offload=tuple(names)))
    backend = {e["name"]: e.get("backend") for e in forced.module.metadata["kernels"] if e.get("backend")}
    if not backend:
        return done(alone, [], None, {}, {"backends": names})
    own = compile_model(model, options=base.replace(offload=tuple(names), offload_groups=frozenset()))
    feeds = dict(zip((i.name for i in alone.input_info), random_inputs(alone.input_info)))
    t_forced, t_own = _kernel_times(forced, feeds), _kernel_times(own, feeds)
    choices = {g: {"backend": b, "backend_s": t_forced.get(g), "ember_s": t_own.get(g),
                   "offloaded": t_forced.get(g) is not None and t_own.get(g) is not None and t_forced[g] < t_own[g]}
               for g, b in backend.items()}
    chosen = frozenset(g for g, c in choices.items() if c["offloaded"])
    mixed = compile_model(model, options=base.replace(offload=tuple(names), offload_groups=chosen)) if chosen else own
    # (end to end, the three: the backend's layout may win or lose more than its kernels do)
    timed = {"ember_alone_s": (alone, frozenset()), "chosen_s": (mixed, chosen),
             "forced_s": (forced, frozenset(backend))}
    # (in turns, so that the machine's noise falls on the three alike; two passes)
    runs = {k: functools.partial(exe.run, **feeds) for k, (exe, _) in timed.items()}
    passes = [interleaved(runs, warmup=WARMUP, repeat=REPEAT) for _ in range(PASSES)]
    pick = pick_configuration(passes)
    best, offloaded = timed[pick]
    times = {k: statistics.median(p[k] for p in passes) for k in timed}
    summary = {"backends": names, **times, "picked": pick, "offloaded": sorted(offloaded), "passes": passes}
    # (kept as the options that make it again: Ember alone is no backend; the forced one every
    # group the backends take, the chosen one its groups)
    return done(best, [] if pick == "ember_alone_s" else names, chosen if pick == "chosen_s" else None, choices, summary)


def pick_configuration(passes: list) -> str:
    """The configuration to return from the end-to-end ``passes`` (dicts of median seconds):
    in each, the fastest, Ember alone unless another wins by more than :data:`MARGIN`; another
    only where every pass picks it. One pass's margin was not enough: MobileNetV2's chosen
    layers won by 3% in auto's pass, then ran 2.7% slower than Ember alone in the same process."""
    picks = {min(t, key=lambda k: t[k] * (1.0 if k == "ember_alone_s" else 1.0 + MARGIN)) for t in passes}
    return picks.pop() if len(picks) == 1 else "ember_alone_s"
