"""The zoo through ``ember.from_torch`` (no ONNX): each model exported with a dynamic batch (and
sequence) dimension, compiled once, run at two shapes against PyTorch eager (rtol 1e-3,
atol 1e-4 of the output's scale); then through ``torch.compile(backend="ember")``. The zoo extra.

    python bench/zoo_from_torch_check.py                 # the whole zoo
    python bench/zoo_from_torch_check.py resnet18 gpt2
    python bench/zoo_from_torch_check.py --no-compile    # from_torch only

Exits 1 if any model fails or differs.
"""
import argparse
import sys
import time

import numpy as np

SHAPES = {"vision": [(1, None), (3, None)], "text": [(1, 32), (2, 48)]}


def _inputs(spec, batch, seq):
    import torch

    feeds = spec.example(batch=batch, seq=seq, seed=batch)
    if spec.kind == "text" and not spec.mask:
        feeds = {"input_ids": feeds["input_ids"]}
    return tuple(torch.from_numpy(v) for v in feeds.values())


def _dynamic(spec, n_inputs):
    import torch

    batch = torch.export.Dim("batch", min=1, max=1024)
    if spec.kind == "vision":
        return ({0: batch},)
    seq = torch.export.Dim("seq", min=2, max=512)
    return tuple({0: batch, 1: seq} for _ in range(n_inputs))


def _compare(got, ref):
    got, ref = got.detach().numpy(), ref.detach().numpy()
    err, scale = float(np.abs(got - ref).max()), float(np.abs(ref).max())
    ok = got.shape == ref.shape and np.allclose(got, ref, rtol=1e-3, atol=1e-4 * max(1.0, scale))
    return ok, err, scale


def check(name: str, compile_too: bool) -> bool:
    import torch

    import ember
    from ember.bench.zoo import ZOO, build_model

    spec = ZOO[name]
    model = build_model(name, seed=0)
    example = _inputs(spec, 2, 16 if spec.kind == "text" else None)
    t0 = time.perf_counter()
    compiled = ember.from_torch(model, example, dynamic_shapes=_dynamic(spec, len(example)))
    took = time.perf_counter() - t0
    dims = ", ".join(str(i.shape) for i in compiled.input_info)
    ok_all = True
    for batch, seq in SHAPES[spec.kind]:
        args = _inputs(spec, batch, seq)
        with torch.no_grad():
            ref = model(*args)
        ok, err, scale = _compare(compiled(*args), ref)
        ok_all &= ok
        shape = tuple(args[0].shape)
        print(f"{name:24s} from_torch {str(shape):18s} max abs diff {err:.2e} (outputs up to {scale:.2e}): "
              f"{'ok' if ok else 'MISMATCH'}", flush=True)
    print(f"{'':24s} (one compile, {took:.1f} s, inputs {dims})", flush=True)
    if compile_too:
        from ember.frontend.torch.dynamo import STATS

        torch._dynamo.reset()
        before = dict(STATS)
        fn = torch.compile(model, backend="ember")
        for batch, seq in SHAPES[spec.kind]:  # (the second shape: Dynamo recompiles with dynamic sizes)
            args = _inputs(spec, batch, seq)
            with torch.no_grad():
                ref = model(*args)
                got = fn(*args)
            ok, err, scale = _compare(got, ref)
            ok_all &= ok
            print(f"{name:24s} torch.compile(backend='ember') {str(tuple(args[0].shape)):18s} max abs diff "
                  f"{err:.2e}: {'ok' if ok else 'MISMATCH'}", flush=True)
        compiled_graphs = STATS["compiled"] - before["compiled"]
        eager = STATS["fallbacks"] - before["fallbacks"]
        ok_all &= eager == 0 and compiled_graphs > 0
        print(f"{'':24s} ({compiled_graphs} graph(s) compiled by Ember, {eager} left to eager)", flush=True)
    return ok_all


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo models (default: all)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile(backend='ember')")
    a = p.parse_args(argv)
    from ember.bench.zoo import ZOO

    failed = []
    for name in a.models or list(ZOO):
        try:
            ok = check(name, not a.no_compile)
        except Exception as e:  # noqa: BLE001 - report and go on to the next model
            print(f"{name:24s} FAILED: {type(e).__name__}: {str(e)[:2000]}", flush=True)
            ok = False
        failed += [] if ok else [name]
    print("all match torch eager at rtol 1e-3" if not failed else f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
