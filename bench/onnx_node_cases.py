"""ONNX node test cases through Ember and ONNX Runtime: pass counts per op type.

Ember runs each case two ways: through ``ember.compile`` (compiled once, as users run a model)
and through the onnx Backend (which compiles again for each value of an input that decides a
shape).

    python bench/onnx_node_cases.py                 # all 1,884 cases, both runtimes
    python bench/onnx_node_cases.py --filter conv   # cases whose name contains 'conv'
    python bench/onnx_node_cases.py --json out.json --failures

Each case is a one-node model with reference inputs and outputs from the onnx package; a case
passes when every output matches at the case's tolerances.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

from ember.frontend.onnx.conformance import node_cases, per_op, reasons, run_cases_in_processes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--filter", default=None, help="only cases whose name contains this")
    p.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    p.add_argument("--json", default=None, help="write per-case results here")
    p.add_argument("--failures", action="store_true", help="list every failing Ember case with its reason")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    cases = node_cases(args.filter)
    t0 = time.perf_counter()

    def progress(k, r):
        if k % 100 == 99:
            print(f"  {k + 1}/{len(cases)} cases, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    # (in child processes, one per core: a case that crashes is a failure, not the report's end)
    compile_res = run_cases_in_processes(args.filter, "compile_runner", progress=progress)
    ember_res = run_cases_in_processes(args.filter, "ember_runner")
    ort_res = [] if args.no_ort else run_cases_in_processes(args.filter, "onnxruntime_runner")
    c_ops, e_ops, o_ops = per_op(compile_res), per_op(ember_res), per_op(ort_res)
    print(f"{'op type':<32} {'compile':>9} {'backend':>9} {'ort':>9}")
    for op, (passed, total) in e_ops.items():
        o, c = o_ops.get(op), c_ops.get(op, (0, total))
        print(f"{op:<32} {c[0]:>4}/{c[1]:<4} {passed:>4}/{total:<4} {(f'{o[0]:>4}/{o[1]:<4}' if o else ''):>9}")
    n = len(cases)
    cp, ep = sum(r.passed for r in compile_res), sum(r.passed for r in ember_res)
    line = (f"TOTAL ember.compile {cp}/{n} ({100 * cp / max(n, 1):.1f}%)   "
            f"ember Backend {ep}/{n} ({100 * ep / max(n, 1):.1f}%)")
    if ort_res:
        op_ = sum(r.passed for r in ort_res)
        line += f"   onnxruntime {op_}/{n} ({100 * op_ / max(n, 1):.1f}%)"
    print(line)
    print("most common failure reasons through ember.compile:")
    for why, count in reasons(compile_res, 25):
        print(f"  {count:4d}  {why}")
    if args.failures:
        for r in compile_res:
            if not r.passed:
                print(f"FAIL {r.name}: {r.reason}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"compile": [r.__dict__ for r in compile_res], "ember": [r.__dict__ for r in ember_res],
                       "onnxruntime": [r.__dict__ for r in ort_res]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
