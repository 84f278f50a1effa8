"""Schedule decisions compared over a whole model, kernel call by kernel call, in one process.

    python bench/knob_ab.py MODEL.onnx '{}' '{"conv.reduction": ""}' '{}'
    python bench/knob_ab.py MODEL.onnx '{}' '{"conv.filters": 2, "conv.columns": 2}' --weights 256,1,1
    OMP_NUM_THREADS=1 python bench/knob_ab.py MODEL.onnx '{}' '{"conv.columns": 6}' --rounds 30

Each variant is the model compiled with a set of knob values (``ember.loop.knobs``) applied the
way a tuning record is, to the groups that have those knobs (``--weights C,KH,KW``: only the
convolutions whose packed weights are ``(F/FB, C, KH, KW, FB)``; ``--only TEXT``: only tasks
whose description contains it). The variants' kernel calls are then timed in place, one
variant's whole run after another's, ``--rounds`` times, and the medians printed per call,
each as a ratio to the first variant's. Repeat the first set (``'{}'`` twice) for a column
that shows the noise: on a 2-core VM two identical builds differ by 3-6% per call.

This is the experiment behind a default: the tuner (``ember tune``) searches the same knobs
per kernel, timed the same way (:mod:`ember.tune.in_place`).
"""
from __future__ import annotations

import argparse
import json
import sys
import types


def _records(tasks, target, values: dict, weights, only) -> dict:
    """``{workload: record}`` making each selected task's kernel under ``values``."""
    from ember.loop.knobs import decisions

    out = {}
    for t in tasks:
        if not values or not any(k in t.knobs for k in values) or (only and only not in t.description):
            continue
        if weights and not any(len(p.type.shape) == 5 and tuple(p.type.shape[1:4]) == weights for p in t.fn.params):
            continue
        with decisions(values):
            sched, _, _ = t.builder.schedule(target)
        out[t.workload] = types.SimpleNamespace(decisions=json.dumps(values, sort_keys=True), trace=sched.trace.to_json())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="an ONNX file with static input shapes")
    ap.add_argument("variants", nargs="+", help="JSON objects of knob values, the first the reference")
    ap.add_argument("--rounds", type=int, default=20, help="alternating rounds (default 20)")
    ap.add_argument("--weights", help="only convolutions from C channels with a KHxKW window: C,KH,KW")
    ap.add_argument("--only", help="only tasks whose description contains this text")
    ap.add_argument("--all", action="store_true", help="print every call, not only those a variant changes")
    args = ap.parse_args(argv)

    import numpy as np

    import ember
    from ember.kernels.common import host
    from ember.profile.kernels import time_calls
    from ember.tune.tasks import extract_tasks, random_inputs

    try:
        variants = [json.loads(v) for v in args.variants]
    except json.JSONDecodeError as e:
        ap.error(f"a variant is not JSON: {e}")
    weights = tuple(int(v) for v in args.weights.split(",")) if args.weights else None
    target = host(None)
    tasks, _ = extract_tasks(args.model, target, profile=False)
    exes = []
    for v in variants:
        recs = _records(tasks, target, v, weights, args.only)
        exes.append(ember.compile(args.model, cache=False, tuning_db=recs or None, wait=True))
        print(f"{json.dumps(v)}: {len(exes[-1].tuned_kernels)} kernel(s) so scheduled", file=sys.stderr)
    inputs = random_inputs(exes[0])
    ref = exes[0].run(*inputs)
    for v, e in zip(variants, exes):
        for a, b in zip(e.run(*inputs), ref):
            if not np.allclose(a, b, rtol=1e-3, atol=1e-3):
                print(f"{json.dumps(v)}: outputs differ from the first variant's", file=sys.stderr)
                return 1
    bound = [e._inputs(tuple(inputs), {}) for e in exes]
    states = [(b, e._layout(b)) for b, e in zip(bound, exes)]
    times = [None] * len(exes)
    for _ in range(args.rounds):
        for k, e in enumerate(exes):
            ts = [dt for _, dt in time_calls(e, *states[k])]
            times[k] = times[k] or [[] for _ in ts]
            for i, dt in enumerate(ts):
                times[k][i].append(dt)
    changed = set().union(*(e.tuned_kernels for e in exes))
    info = exes[0].program["calls"]
    totals = [0.0] * len(exes)
    print(f"{'call':>4}  {'kernel':44} " + " ".join(f"{'v' + str(k):>9}" for k in range(len(exes))) + "   (us, medians; ratios to v0)")
    for i, (kernel, _) in enumerate(exes[0].kernel_calls):
        meds = [float(np.median(times[k][i])) * 1e6 for k in range(len(exes))]
        totals = [t + m for t, m in zip(totals, meds)]
        if args.all or any(e.kernel_calls[i][0] in changed for e in exes):
            ops = "+".join(info[i].get("ops", []))[:44]
            print(f"{i:4d}  {ops:44} " + " ".join(f"{m:9.1f}" for m in meds)
                  + "   " + " ".join(f"{meds[0] / m:5.2f}x" for m in meds[1:]))
    print("all calls: " + " ".join(f"{t / 1e3:.2f} ms" for t in totals) + "   "
          + " ".join(f"{totals[0] / t:.3f}x" for t in totals[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
