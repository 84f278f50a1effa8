"""``ember tune``: tune a model's kernels into a records database; move records in and out."""
from __future__ import annotations

import argparse
import json
import os
import sys

from .cli_model import _shapes, add_model_arg, model_path

EPILOG = """\
how it works:
  The model is compiled and profiled once; each fused group with schedule decisions (conv
  register blocks, reduction chunks, GEMM tiles, ...) is a task, weighted by its share of the
  model's time. An evolutionary search proposes candidate schedules, a LightGBM cost model
  (trained on the database's records, other models' included) ranks them, and the best are
  built and checked in isolated worker processes (a candidate that crashes, hangs or computes
  a wrong answer is recorded as failed), then timed in the model: the untuned model runs with
  the candidate in its task's calls, beside runs with the default (--alone: the kernel by
  itself). Every measurement is a record in the database; tuning again resumes from it, and a
  compile applies the best record of each kernel. At the end each kernel's three best are
  timed in the model beside the others, and the one least slow there against the default is
  kept (a runner-up can beat the best); where none beats the default, the default stays
  until tuning finds better. (Unless the untuned kernels run more than 10% off their time
  when tuning began: a shared machine then is in another state, and nothing is recorded.)

examples:
  ember tune model.onnx --minutes 8 --db tuning.db
  ember compile model.onnx --tuning-db tuning.db          # the tuned kernels
  ember tune model.onnx --minutes 0 --db tuning.db         # only check the database's kernels in the model
  ember tune model.onnx --minutes 30 --db postgresql://me@dbhost/ember --cluster tcp://sched:8786
  ember tune --db tuning.db --export records.jsonl         # share records as JSON lines
  ember tune --db team.db --import records.jsonl

a cluster: start `dask scheduler` on one machine and `dask worker tcp://HOST:8786` on each
machine to measure on (one measurement per machine at a time, whatever its worker count);
the search runs here. Without --cluster a local Dask cluster measures on this machine.
"""


def tune_main(argv) -> int:
    p = argparse.ArgumentParser(prog="ember tune", formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Tune a model's kernels for this machine within a time budget; "
                                            "the measurements go to a records database.", epilog=EPILOG)
    add_model_arg(p, "the ONNX model file to tune")
    p.add_argument("--db", required=True, metavar="DB",
                   help="the records database: an SQLite file (created if missing) or a postgresql:// URL")
    p.add_argument("--minutes", type=float, default=8.0, help="the time budget (default 8)")
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="a Dask scheduler (tcp://host:8786) whose workers build and measure; 'local' (the "
                        "default) starts a local Dask cluster; 'none' measures in child processes without Dask")
    p.add_argument("--workers", type=int, default=1, help="workers of the local Dask cluster (default 1)")
    p.add_argument("--batch", type=int, default=8, help="candidates measured per round of a task (default 8)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="a candidate's build and measurement past this count as hung (default 30)")
    p.add_argument("--no-transfer", action="store_true",
                   help="do not train the cost model on other workloads' records before measuring")
    p.add_argument("--no-check", action="store_true",
                   help="skip the check at the end (each kernel's three best timed in the model against the "
                        "default, keeping the least slow, or the default)")
    p.add_argument("--any-partition", action="store_true",
                   help="also try schedules whose threads split a kernel's output otherwise than its default "
                        "(rows for channel blocks): off by default, as a kernel timed alone (--alone) cannot show "
                        "what reading its input from the other cores' caches costs in the model, which on chiplet "
                        "CPUs and VMs whose cores share no L3 is often more than the schedule gains; timed in the "
                        "model it is safe, but found no more on EfficientNet-B0 (in the model 1.02x either way)")
    p.add_argument("--alone", action="store_true",
                   help="time candidates alone, not in the model: by default each batch runs in the untuned "
                        "model (exported once to a temporary file) with the candidate in its task's calls, since a "
                        "kernel's inputs come from the kernel before it there, and that changes which schedule wins "
                        "(a remote --cluster's workers, which cannot load that file, time alone)")
    p.add_argument("--max-tasks", type=int, default=None, metavar="N", help="tune only the N heaviest tasks")
    p.add_argument("--only", action="append", metavar="TEXT",
                   help="tune only the tasks whose description (ops and output shape, as the table shows "
                        "them) contains TEXT; repeatable")
    p.add_argument("--input-shape", action="append", metavar="NAME=D1,D2,...",
                   help="fix a symbolic input shape: tuning is for one size (default: the likely one, a batch "
                        "of 1, images of 224x224, sequences of 128), and a compile of the model with --shape-hint "
                        "at that size uses the records in its kernels' static twins (or with --input-shape, for "
                        "that size alone)")
    p.add_argument("--target", default=None, help="the target (default: this machine's CPU)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="tune the kernels of this precision (as 'ember compile --precision'; quantized int8 "
                        "files tune their integer kernels as they are)")
    p.add_argument("--curve", metavar="FILE.csv", help="write the tuning curve (seconds, estimated latency)")
    p.add_argument("--plot", metavar="FILE.png", help="plot the tuning curve (needs matplotlib)")
    p.add_argument("--json", metavar="FILE", help="write the report (per task: default, best, trials) as JSON")
    p.add_argument("--export", metavar="FILE.jsonl", help="write every record of --db as JSON lines, then stop")
    p.add_argument("--import", dest="import_", metavar="FILE.jsonl",
                   help="add the records of a JSON-lines file to --db, then stop")
    args = p.parse_args(argv)
    from .extras import require

    require("sqlalchemy", *(() if args.export or args.import_ else ("lightgbm", "distributed")))
    from .tune.database import open_database

    if args.export or args.import_:
        with open_database(args.db) as db:
            if args.export:
                n = db.export_jsonl(args.export)
                print(f"wrote {n} record(s) of {db.url} to {args.export}")
            if args.import_:
                n = db.import_jsonl(args.import_)
                print(f"added {n} record(s) from {args.import_} to {db.url}")
        return 0
    from .tune.tuner import tune

    path = model_path(args, "ember tune")
    report = tune(path, args.db, minutes=args.minutes, cluster=args.cluster, target=args.target, precision=args.precision,
                  batch=args.batch, workers=args.workers, timeout=args.timeout, transfer=not args.no_transfer,
                  max_tasks=args.max_tasks, input_shapes=_shapes(args.input_shape), validate=not args.no_check,
                  keep_partition=not args.any_partition, in_place=not args.alone, only=(lambda t: any(x in t.description for x in args.only)) if args.only else None)
    print(report.table())
    if args.curve:
        with open(args.curve, "w") as fh:
            fh.write("seconds,estimated_latency_ms\n")
            fh.writelines(f"{t:.1f},{lat * 1e3:.4f}\n" for t, lat in report.curve)
    if args.plot:
        from .tune.plot import plot_curve

        plot_curve(report, args.plot)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report.as_dict(), fh, indent=1)
    # a model with symbolic inputs tuned at one size: its records serve that size, which the
    # compile must be told (the kernels' static twins are made for the hinted sizes)
    hints = "".join(f" --shape-hint {k}={','.join(map(str, v))}" for k, v in report.input_shapes.items())
    hints += "" if args.precision == "fp32" else f" --precision {args.precision}"
    print(f"records in {args.db}; compile with them: ember compile {os.path.basename(path)} --tuning-db {args.db}{hints}",
          file=sys.stderr)
    return 0
