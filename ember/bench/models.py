"""``ember bench``: compile models and time them against ONNX Runtime (and OpenVINO, TVM), each
runtime alone in a process of its own.

    ember bench --light resnet50                 # a model that ships with the onnx package (random weights)
    ember bench model.onnx --vs onnxruntime --vs openvino --vs tvm
    ember bench --all-light --json figures.json
    ember bench --zoo --vs onnxruntime --vs openvino      # today's architectures (the zoo extra)

Each runtime runs alone in a fresh process (warm-up first, then timed runs; the processes
alternate between the runtimes for a few rounds) and the medians and ratios are printed, as
users run a model: in one process a runtime's spinning threads steal the cores from the next
one's parallel regions (``--in-process`` measures that way, alternating turns). The peers get
the same number of threads as Ember's cores (OpenVINO with the f32 precision hint, TVM untuned:
see ``ember.bench.peers``). Peers that are not installed are skipped with a note.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from typing import Optional

import numpy as np

LIGHT = ["resnet50", "densenet121", "inception_v1", "inception_v2", "squeezenet", "shufflenet",
         "vgg19", "bvlc_alexnet", "zfnet512"]


def light_path(name: str) -> str:
    import onnx

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
    if not os.path.exists(path):
        raise SystemExit(f"no light model {name!r}; the onnx package ships: {', '.join(LIGHT)}")
    return path


def random_weights(path: str, out_dir: str, seed: int = 0) -> str:
    """A copy of the model whose weights are random initializers instead of splat constants.

    The light models build every weight with ConstantOfShape (one value, 0.02); an
    optimization that only works for such weights must not pass for a real one. Each weight
    becomes a float32 initializer drawn from N(0, 2/fan_in) (He initialization, so activations
    keep their scale through deep networks); 1-D weights (biases, BN parameters) are drawn near
    their usual values, and variances stay positive."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    g = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    rng = np.random.default_rng(seed)
    keep, added = [], []
    for n in g.node:
        shape = values.get(n.input[0]) if n.op_type == "ConstantOfShape" and n.input else None
        if shape is None:
            keep.append(n)
            continue
        shape = tuple(int(d) for d in shape)
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            w = rng.normal(0.0, np.sqrt(2.0 / fan_in), shape)
        else:
            w = rng.uniform(0.5, 1.5, shape)  # positive: a BN variance or scale stays valid
        added.append(numpy_helper.from_array(w.astype(np.float32), n.output[0]))
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(added)
    out = os.path.join(out_dir, os.path.basename(path).replace(".onnx", "_random.onnx"))
    onnx.save(model, out)
    return out


def _inputs(exe, seed: int = 0, shapes: Optional[dict] = None) -> tuple:
    """Random inputs for ``exe`` (zeros for integer ones: token ids), at ``shapes`` where given,
    else with every symbolic dim 1; and a note naming the dims so bound (or "")."""
    rng = np.random.default_rng(seed)
    feeds, bound = {}, []
    for i in exe.input_info:
        shape = (shapes or {}).get(i.name)
        if shape is None:
            shape = tuple(d if isinstance(d, int) else 1 for d in i.shape)
            if shape != tuple(i.shape):
                bound.append(f"{i.name} {tuple(i.shape)} -> {shape}")
        feeds[i.name] = rng.random(shape, dtype=np.float32) if i.dtype == "float32" else np.zeros(shape, i.dtype)
    note = (f"symbolic dims set to 1: {'; '.join(bound)} (--input-shape NAME=D1,D2,... to choose)"
            if bound else "")
    return feeds, note


def bench_model(path: str, peers: list, threads: int, repeat: int, out=print, isolated: bool = True,
                feeds: dict = None, rounds: int = 3, name: str = None, input_shapes: Optional[dict] = None) -> dict:
    """Compile ``path`` (cold and warm) and time it against ``peers``: each runtime alone in a
    process of its own, alternating, ``rounds`` times (``isolated``, the default: as users run
    it), or all in this process, alternating turns. Without ``feeds``, random inputs at
    ``input_shapes`` (per input name; symbolic dims not given there are 1)."""
    import ember
    from ember.profile.timing import interleaved

    import tempfile

    # cold: a fresh kernel cache, so every kernel is optimized and compiled by LLVM
    old = os.environ.get("EMBER_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="ember-cold-") as cold:
        os.environ["EMBER_CACHE_DIR"] = cold
        try:
            t0 = time.perf_counter()
            ember.compile(path, cache=False, wait=True)
            compile_s = time.perf_counter() - t0
        finally:
            if old is None:
                del os.environ["EMBER_CACHE_DIR"]
            else:
                os.environ["EMBER_CACHE_DIR"] = old
    ember.compile(path, wait=True)  # fills the real cache
    t0 = time.perf_counter()
    exe = ember.compile(path, wait=True)  # again: every kernel now comes from the cache
    warm_s = time.perf_counter() - t0
    notes = []
    if feeds is None:
        feeds, bound = _inputs(exe, shapes=input_shapes)
        notes += [bound] if bound else []
    fns = {"ember": lambda: exe.run(**feeds)}
    from .peers import INSTALL, PEERS

    for peer in peers:
        run = PEERS[peer](path, threads, exe.input_info)
        if run is None:
            notes.append(f"{peer} is not installed: skipped ({INSTALL[peer]})")
            continue
        fns[peer] = functools.partial(run, feeds)
        ref = run(feeds)
        got = exe.run(**feeds)
        err = max(float(np.max(np.abs(a - np.asarray(b)))) for a, b in zip(got, ref))  # (torch peers: tensors)
        notes.append(f"max abs difference to {peer}: {err:.3g}")
    if isolated:  # each runtime alone in its own process (the peers here only checked the outputs)
        from .isolated import paired_ratio, time_isolated

        ran = list(fns)
        del fns
        res = time_isolated(path, feeds, ran, threads, rounds=rounds, repeat=repeat)
        times = {k: v["median"] for k, v in res.items() if "median" in v}
        notes += [f"{k}: {v.get('error') or v.get('skipped')}" for k, v in res.items() if "median" not in v]
        split = _placement_note(res)
        if split:
            notes.append(split)
        if "ember" not in times:
            out(f"{name or os.path.basename(path):<28} ember failed: {res['ember']}")
            return {"model": name or os.path.basename(path), "error": str(res["ember"])}
    else:
        times = interleaved(fns, warmup=3, repeat=repeat)
    row = {"model": name or os.path.basename(path), "compile_s": compile_s, "warm_compile_s": warm_s,
           "kernel_calls": len(exe.kernel_calls),
           "median_ms": {k: v * 1e3 for k, v in times.items()}}
    if isolated:  # each round's median and where the cores were (see ember.bench.placement)
        row["rounds"] = {k: v["rounds"] for k, v in res.items() if "rounds" in v}
    line = f"{row['model']:<28} ember {times['ember'] * 1e3:9.2f} ms"
    for k, v in times.items():
        if k != "ember":
            line += f"   {k} {v * 1e3:9.2f} ms   ember/{k} {times['ember'] / v:5.2f}x"
            row[f"ratio_{k}"] = times["ember"] / v
            paired = paired_ratio(res, "ember", k) if isolated else None
            if paired is not None and len(res["ember"]["rounds"]) > 1:
                line += f" (paired {paired:.2f}x)"
                row[f"paired_ratio_{k}"] = paired
    out(line + f"   (compile {compile_s:.1f} s cold, {warm_s:.1f} s warm; "
               f"{len(exe.kernel_calls)} kernel calls)")
    for n in notes:
        out(f"  {n}")
    return row


def _placement_note(res: dict) -> str:
    """A note giving each placement's figures apart, when the rounds ran in more than one (a
    shared VM whose cores moved: the overall medians then mix two machines)."""
    from .isolated import by_placement
    from ..runtime.placement import describe

    split = by_placement(res)
    mixed = [x for v in res.values() for x in v.get("rounds", []) if not x.get("placement")]
    if len(split) < 2 and not mixed:
        return ""
    trips = [t for v in res.values() for x in v.get("rounds", []) for t in x.get("round_trips", [])]
    parts = []
    for where in ("near", "far"):
        got = split.get(where, {})
        if not got:
            continue
        med = {k: statistics.median(v) for k, v in got.items()}
        text = ", ".join(f"{k} {m * 1e3:.2f} ms ({len(got[k])})" for k, m in med.items())
        if "ember" in med:
            text += "".join(f", ember/{k} {med['ember'] / m:.2f}x" for k, m in med.items() if k != "ember")
        parts.append(f"{where}: {text}")
    moved = f"; {len(mixed)} round(s) moved while timing" if mixed else ""
    return (f"the cores moved between placements during the rounds ({describe(trips)}; near: sharing "
            f"an L3, far: not{moved}); by placement, medians (rounds): " + "; ".join(parts))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ember bench", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("models", nargs="*", help="ONNX model files")
    p.add_argument("--light", action="append", default=[], metavar="NAME",
                   help=f"a model from the onnx package: {', '.join(LIGHT)}")
    p.add_argument("--all-light", action="store_true", help="all nine light models")
    p.add_argument("--vs", action="append", default=None,
                   choices=["onnxruntime", "openvino", "tvm", "from_torch", "inductor", "ember_auto"],
                   help="peer runtime(s) to compare with, repeatable (default: onnxruntime); one that "
                        "is not installed is skipped with a note. ember_auto: Ember itself with "
                        "offload='auto' (oneDNN where its kernels measured faster)")
    p.add_argument("--threads", type=int, default=None, help="threads for the peers (default: Ember's cores)")
    p.add_argument("--repeat", type=int, default=10, help="timed turns per runtime (default 10)")
    p.add_argument("--json", default=None, help="write the figures to this file")
    p.add_argument("--random-weights", action="store_true",
                   help="give the model files named random weights too (the light models get them by default)")
    p.add_argument("--splat-weights", action="store_true",
                   help="keep the light models' own weights: every one a splat constant (0.02), on which an "
                        "optimization that real weights would defeat could pass; by default they are replaced "
                        "by random initializers (He, seeded)")
    p.add_argument("--zoo", nargs="*", metavar="NAME", default=None,
                   help="the zoo of real architectures (torchvision and transformers classes with random "
                        "weights, exported with torch.onnx.export(dynamo=True); needs the zoo extra): all "
                        "of it, or the models named")
    p.add_argument("--in-process", action="store_true",
                   help="time every runtime in this one process, alternating turns (default: each alone "
                        "in a process of its own, as users run it; in one process a runtime's spinning "
                        "threads slow the next one's parallel regions)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of processes (default 3)")
    p.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...",
                   help="the shape of an input with symbolic dims, e.g. --input-shape input_ids=1,128 "
                        "(without it every symbolic dim is 1)")
    args = p.parse_args(argv)
    from ember.cli_model import _shapes
    from ember.target import Target

    light = [light_path(n) for n in (LIGHT if args.all_light else args.light)]
    paths = list(args.models) + light
    zoo_feeds: dict = {}
    if args.zoo is not None:
        from . import zoo

        out_dir = os.path.join(os.path.expanduser("~"), ".cache", "ember", "zoo")
        for name in args.zoo or list(zoo.ZOO):
            if name not in zoo.ZOO:
                p.error(f"no zoo model {name!r}; the zoo has: {', '.join(zoo.ZOO)}")
            print(f"exporting {name} ...", file=sys.stderr, flush=True)
            path = zoo.export(name, out_dir)
            paths.append(path)
            zoo_feeds[path] = zoo.ZOO[name].example(batch=1, seq=128, seed=1)
    if not paths:
        paths = light = [light_path("resnet50")]
    threads = args.threads or Target.host().cores
    peers = args.vs or ["onnxruntime"]
    how = (f"medians of {args.repeat} alternating turns in this process" if args.in_process else
           f"each runtime alone in its own process, {args.rounds} alternating rounds, medians of {args.repeat} runs")
    randomize = set(light if not args.splat_weights else ()) | set(args.models if args.random_weights else ())
    weights = ("; light models with random weights (--splat-weights: their own)" if light and not args.splat_weights
               else "")
    print(f"ember bench: {len(paths)} model(s), peers: {', '.join(peers)}, {threads} threads; {how}{weights}",
          file=sys.stderr)
    if randomize:
        import tempfile

        tmp = tempfile.mkdtemp(prefix="ember-bench-")
        paths = [random_weights(p_, tmp) if p_ in randomize else p_ for p_ in paths]
    shapes = _shapes(args.input_shape)
    rows = [bench_model(path, peers, threads, args.repeat, isolated=not args.in_process, feeds=zoo_feeds.get(path),
                        rounds=args.rounds, input_shapes=shapes) for path in paths]
    for peer in peers:
        ratios = [r[f"ratio_{peer}"] for r in rows if f"ratio_{peer}" in r]
        if len(ratios) > 1:
            paired = [r[f"paired_ratio_{peer}"] for r in rows if f"paired_ratio_{peer}" in r]
            print(f"geometric mean ember/{peer}: {float(np.exp(np.mean(np.log(ratios)))):.2f}x"
                  + (f" (paired rounds: {float(np.exp(np.mean(np.log(paired)))):.2f}x)" if len(paired) == len(ratios) else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
