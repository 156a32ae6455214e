"""The whole OpInfo walk, written to docs/ops.md.

    python -m tests.python.opinfo.report                 # all of op_db -> docs/ops.md
    python -m tests.python.opinfo.report --ops add,mul   # a few ops, printed only
    python -m tests.python.opinfo.report --backends host,pjrt   # docs/ops.md with a pjrt column

`--backends host,pjrt` walks again on the PJRT backend (TORCH_TPU_BACKEND=pjrt: the XLA CPU
plugin unless TORCH_TPU_PJRT_PLUGIN names another), float32 only, into its own results file
(results-pjrt.jsonl beside the host's), and docs/ops.md gains a "pjrt float32" column and totals
row: the same comparisons against PyTorch CPU, the programs compiled and run by XLA.

The walk runs in a worker process that appends one JSON line per (op, dtype) to a results file
(build/opinfo/results.jsonl in this tree unless --jsonl names another; never a fixed name in a
shared directory such as /tmp, where another user could plant a symlink to redirect the writes).
If an op kills the worker (a crash) or stops it making progress, the parent records that
(op, dtype) as failing and restarts the worker after it, so one bad op cannot lose the report.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import time

STALL_SECONDS = 300  # no sample finished for this long: the worker is stuck
STATUSES = ("native", "fallback", "fails", "skipped")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_JSONL = os.path.join(ROOT, "build", "opinfo", "results.jsonl")


# ---------------------------------------------------------------------------------------------
# Worker


def worker(args) -> None:
    import torch_tpu

    from . import walker

    torch_tpu.set_eager_mode("strict")  # the default; the walk is defined in it
    wanted = os.environ.get("TORCH_TPU_BACKEND")
    if wanted:  # a pjrt column must come from the pjrt backend, not from a silent default
        import torch

        got = torch.tpu.get_device_properties(0).backend
        if got != wanted:
            raise SystemExit(f"the walk asked for backend {wanted} and the device runs on {got}")
    alive = heartbeat_path(args.jsonl)

    def beat() -> None:
        with open(alive, "a"):
            os.utime(alive)

    ops = walker.op_db() if not args.ops else walker.find_ops(args.ops.split(","))
    dtypes = [d for d in walker.DTYPES if walker.DTYPE_NAMES[d] in args.dtypes.split(",")]
    done = set()
    if os.path.exists(args.jsonl):
        with open(args.jsonl) as f:
            for line in f:
                r = json.loads(line)
                if "status" in r:
                    done.add((r["op"], r["dtype"]))
    with open(args.jsonl, "a") as f:
        def write(rec):
            f.write(json.dumps(rec) + "\n")
            f.flush()

        for op in ops:
            for dtype in dtypes:
                key = (walker.op_id(op), walker.DTYPE_NAMES[dtype])
                if key in done:
                    continue
                write({"begin": key[0], "dtype": key[1]})
                try:
                    res = walker.check_op(op, dtype, progress=beat)
                except Exception as e:  # a harness bug: say so rather than lose the op
                    res = walker.Result(key[0], key[1], status="fails", error=f"harness: {e!r}")
                write(dataclasses.asdict(res))


# ---------------------------------------------------------------------------------------------
# Parent: run the worker to completion, restarting it after a crash or a stall


def _read(jsonl):
    results, pending = {}, None
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash
                if "begin" in r:
                    pending = (r["begin"], r["dtype"])
                else:
                    results[(r["op"], r["dtype"])] = r
                    pending = None
    return results, pending


def heartbeat_path(jsonl: str) -> str:
    """The file the worker touches after every sample (beside its results file)."""
    return jsonl + ".alive"


def run_walk(args, backend=None) -> dict:
    """The walk's results, (op, dtype) -> record; on the backend the environment selects, or on
    `backend` ("host" or "pjrt")."""
    cmd = [sys.executable, "-m", "tests.python.opinfo.report", "--worker", "--jsonl", args.jsonl,
           "--dtypes", args.dtypes] + (["--ops", args.ops] if args.ops else [])
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    if backend:
        env["TORCH_TPU_BACKEND"] = backend
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    while True:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
        last_size, last_change = -1, time.time()
        alive = heartbeat_path(args.jsonl)
        while proc.poll() is None:
            time.sleep(2)
            size = os.path.getsize(args.jsonl) if os.path.exists(args.jsonl) else 0
            if size != last_size:
                last_size, last_change = size, time.time()
            # Each finished sample touches the heartbeat: an op with 1,440 samples (max_pool2d)
            # that compiles a program for each on XLA is slow, not stuck.
            if os.path.exists(alive):
                last_change = max(last_change, os.path.getmtime(alive))
            if time.time() - last_change > STALL_SECONDS:
                proc.kill()
                proc.wait()
                break
        results, pending = _read(args.jsonl)
        if proc.returncode == 0 and pending is None:
            return results
        if pending is None:
            raise SystemExit(f"the walk's worker failed before starting an op (exit {proc.returncode})")
        why = "stopped making progress" if proc.returncode in (-9, None) else f"killed the process (exit {proc.returncode})"
        print(f"[opinfo] {pending[0]} {pending[1]} {why}; restarting after it", flush=True)
        with open(args.jsonl, "a") as f:
            f.write(json.dumps({"op": pending[0], "dtype": pending[1], "status": "fails",
                                "grad": "n/a", "error": f"the op {why}"}) + "\n")


# ---------------------------------------------------------------------------------------------
# docs/ops.md


def _cell(r) -> str:
    if r is None:
        return "—"
    s = r["status"]
    if s == "skipped" and r.get("error") == "no CPU kernel for this dtype":
        return "—"
    if s in ("native", "fallback") and not r.get("values_checked", True):
        return s + "†"
    return s


def _note(rs) -> str:
    notes = []
    fb = sorted({o for r in rs for o in r.get("fallback_ops", []) + r.get("grad_fallback_ops", [])})
    if fb:
        notes.append("CPU fallback: " + ", ".join(f"`{o}`" for o in fb[:6]) + (" …" if len(fb) > 6 else ""))
    for r in rs:
        if r["status"] == "fails":
            notes.append(f"{r['dtype']}: {_md(r['error'])}")
        if r.get("grad") == "fails":
            notes.append(f"grad: {_md(r['grad_error'])}")
        for p in r.get("error_problems", [])[:2]:
            notes.append(f"errors: {_md(p)}")
    return "<br>".join(notes)


def _errors_cell(r) -> str:
    if not r or not r.get("error_inputs"):
        return "—"
    bad = len(r.get("error_problems", []))
    return f"{r['error_inputs']} ok" if not bad else f"{bad} of {r['error_inputs']} differ"


def _md(text, limit=220) -> str:
    text = text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")
    return text if len(text) <= limit else text[:limit] + "…"


# Failure messages -> cause, for the summary (first match wins; anything else is "other").
CAUSES = [
    (r"Complex\w* is not supported|view_as_complex", "complex dtypes are not supported on the device"),
    (r"does not support (complex|Complex)", "a native kernel without a complex path (NotImplementedError)"),
    (r"Sparse|sparse", "sparse layouts are not supported on the device"),
    (r"Bad in-place call", "in-place op whose CPU kernel resizes a broadcastable self (the device refuses)"),
    (r"killed the process|stopped making progress", "crash or hang"),
    (r"INTERNAL ASSERT|internal error", "internal error in a lowering"),
    (r"only supports CPU, CUDA", "ATen composite that refuses other devices"),
    (r"not close|not equal", "values differ"),
    (r"view of input|strides|contiguous", "aliasing or layout differs"),
    (r"dtype|shape", "dtype or shape differs"),
]


def cause(text) -> str:
    import re

    for pattern, label in CAUSES:
        if re.search(pattern, text):
            return label
    return "other"


def failure_groups(results):
    """cause -> sorted ["op (dtypes)"] over forward and gradient failures."""
    groups: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for (op, d), r in sorted(results.items()):
        if r["status"] == "fails":
            groups[cause(r["error"])][op].append(d)
        if r.get("grad") == "fails":
            groups[cause(r["grad_error"])][op].append("grad")
    return {c: [f"{op} ({', '.join(ds)})" for op, ds in ops.items()] for c, ops in groups.items()}


def totals(results, dtypes):
    t = {d: collections.Counter() for d in dtypes}
    for (op, d), r in results.items():
        if d in t and _cell(r) != "—":
            t[d][r["status"]] += 1
            if r["status"] in ("native", "fallback") and not r.get("values_checked", True):
                t[d]["unverified"] += 1
    g = collections.Counter(r.get("grad", "n/a") for (op, d), r in results.items() if d == "float32")
    f32 = [r for (op, d), r in results.items() if d == "float32"]
    g["error_inputs"] = sum(r.get("error_inputs", 0) for r in f32)
    g["error_problems"] = sum(len(r.get("error_problems", [])) for r in f32)
    return t, g


PJRT_DTYPE = "float32"  # the dtype the pjrt walk covers


def write_markdown(results, dtypes, path, pjrt=None) -> None:
    """`pjrt`: the float32 walk's results on the PJRT backend, for its column (None: no column)."""
    import torch

    ops = sorted({op for op, _ in results})
    seconds = sum(r.get("seconds", 0) for r in results.values())
    t, g = totals(results, dtypes)
    out = ["# Operator coverage: PyTorch's OpInfo database on the tpu device", "",
           "Generated by `python -m tests.python.opinfo.report` (torch " + torch.__version__ + f", "
           f"{len(ops)} OpInfo entries, {seconds / 60:.0f} min of comparisons). Every sample input of "
           "`torch.testing._internal.common_methods_invocations.op_db` is run on CPU and on the "
           "device in strict mode, and the results compared (values, dtypes, shapes, aliasing, "
           "contiguity, inputs after the call; gradients in float32), for the function variant "
           "and again with the samples made non-contiguous and through the in-place variant. "
           "Tolerances are torch.testing's defaults (float32 and complex64 rtol 1.3e-6/atol 1e-5, "
           "bfloat16 rtol 1.6e-2/atol 1e-5, exact otherwise); the few exceptions, each with its reason, are "
           "in tests/python/opinfo/policy.py (a mismatch there gets a second opinion from the op "
           "computed in float64: the device must be at least about as accurate as CPU). The index "
           "results of sort (non-stable), topk, kthvalue and median may order equal elements "
           "differently from CPU: they must select the same values, each index once.", "",
           "- **native**: every sample matches CPU, no CPU fallback",
           "- **fallback**: every sample matches CPU, but some op ran through the CPU fallback",
           "- **fails**: a sample mismatches CPU, or raises on the device where CPU does not",
           "- **skipped**: CPU itself fails on every sample; **—**: no CPU kernel for the dtype",
           "- **†**: random values (a generator, or uninitialized memory): dtypes and shapes only",
           "", "## Totals", "",
           "| dtype | native | fallback | fails | skipped | of which † |", "|---|---|---|---|---|---|"]
    for d in dtypes:
        c = t[d]
        out.append(f"| {d} | {c['native']} | {c['fallback']} | {c['fails']} | {c['skipped']} | {c['unverified']} |")
    out.append(f"| float32 gradients | {g['native']} | {g['fallback']} | {g['fails']} | {g['skipped']} | |")
    if pjrt is not None:
        tp, gp = totals(pjrt, [PJRT_DTYPE])
        c = tp[PJRT_DTYPE]
        out.append(f"| {PJRT_DTYPE} on pjrt | {c['native']} | {c['fallback']} | {c['fails']} | {c['skipped']} "
                   f"| {c['unverified']} |")
        out.append(f"| {PJRT_DTYPE} gradients on pjrt | {gp['native']} | {gp['fallback']} | {gp['fails']} "
                   f"| {gp['skipped']} | |")
        walked = sum(1 for (op, d) in results if d == PJRT_DTYPE and (op, d) in pjrt)
        host_total = sum(1 for (op, d) in results if d == PJRT_DTYPE)
        out += ["", "The pjrt rows and column: the same walk on the PJRT backend (`TORCH_TPU_BACKEND=pjrt`, "
                "the XLA CPU plugin), float32: the device's programs compiled and run by XLA, compared "
                f"with PyTorch CPU as above ({walked} of the {host_total} float32 entries walked there"
                + ("" if walked == host_total else "; the others say 'not walked'") + ")."]
    out += ["", f"OpInfo error inputs (bad arguments CPU rejects): {g['error_inputs']} checked, "
            f"{g['error_inputs'] - g['error_problems']} raise the same exception type and message on the "
            f"device, {g['error_problems']} differ (see the notes)."]
    out += ["", "## Failures by cause", ""]
    for c, entries in sorted(failure_groups(results).items(), key=lambda kv: -len(kv[1])):
        out.append(f"- **{c}** ({len(entries)}): " + ", ".join(f"`{o}`" for o in entries))
    pj_head = f" pjrt {PJRT_DTYPE} |" if pjrt is not None else ""
    out += ["", "## Per op", "",
            "| op | " + " | ".join(dtypes) + " | grad float32 | error inputs |" + pj_head + " notes |",
            "|---|" + "---|" * len(dtypes) + "---|---|" + ("---|" if pjrt is not None else "") + "---|"]
    for op in ops:
        rs = [results.get((op, d)) for d in dtypes]
        f32 = results.get((op, "float32"))
        grad = f32.get("grad", "n/a") if f32 else "n/a"
        pj_cell, pj_notes = "", []
        if pjrt is not None:
            pr = pjrt.get((op, PJRT_DTYPE))
            pj_cell = f" {_cell(pr) if pr or not f32 else 'not walked'} |"
            if pr and pr["status"] == "fails" and (not f32 or f32["status"] != "fails"):
                pj_notes.append(f"pjrt: {_md(pr['error'])}")  # fails on pjrt only
        out.append(f"| `{op}` | " + " | ".join(_cell(r) for r in rs) + f" | {grad} | {_errors_cell(f32)} |"
                   + pj_cell + " " + "<br>".join(filter(None, [_note([r for r in rs if r])] + pj_notes)) + " |")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def print_totals(results, dtypes) -> None:
    t, g = totals(results, dtypes)
    for d in dtypes:
        c = t[d]
        print(f"{d:>9}: " + "  ".join(f"{s} {c[s]}" for s in STATUSES) + f"  (random, unverified: {c['unverified']})")
    print("float32 gradients: " + "  ".join(f"{s} {g[s]}" for s in STATUSES))
    print(f"error inputs: {g['error_inputs']} checked, {g['error_problems']} differ")
    for c, entries in sorted(failure_groups(results).items(), key=lambda kv: -len(kv[1])):
        print(f"failing, {c}: {len(entries)}")
        for o in entries:
            print(f"  {o}")
    if len(results) <= 200:  # a few ops: the first failure of each, in full
        for (op, d), r in sorted(results.items()):
            if r["status"] == "fails":
                print(f"{op} {d}: {r['error']}")
            if r.get("grad") == "fails":
                print(f"{op} {d} grad: {r['grad_error']}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", help="comma-separated op ids (default: all of op_db)")
    p.add_argument("--dtypes", default="float32,bfloat16,int64,bool,complex64")
    p.add_argument("--jsonl", default=DEFAULT_JSONL,
                   help="results file, resumed if present (default: build/opinfo/results.jsonl)")
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming --jsonl")
    p.add_argument("--out", help="markdown file (default: docs/ops.md for a full walk)")
    p.add_argument("--backends", default="host",
                   help="host, or host,pjrt: also walk float32 on the PJRT backend, for docs/ops.md's pjrt column")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return
    backends = args.backends.split(",")
    if backends[0] != "host" or not set(backends) <= {"host", "pjrt"}:
        p.error(f"--backends {args.backends}: expected host or host,pjrt")
    os.makedirs(os.path.dirname(os.path.abspath(args.jsonl)), exist_ok=True)
    pjrt_args = None
    if "pjrt" in backends:
        root, ext = os.path.splitext(args.jsonl)
        pjrt_args = argparse.Namespace(**{**vars(args), "jsonl": f"{root}-pjrt{ext}", "dtypes": PJRT_DTYPE})
    for a in filter(None, [args, pjrt_args]):
        if args.fresh and os.path.exists(a.jsonl):
            os.remove(a.jsonl)
    wanted = set(args.ops.split(",")) if args.ops else None

    def walk(a, backend):
        r = run_walk(a, backend)
        return {k: v for k, v in r.items() if k[0] in wanted} if wanted else r

    results = walk(args, "host" if pjrt_args else None)
    dtypes = args.dtypes.split(",")
    print_totals(results, dtypes)
    pjrt = None
    if pjrt_args:
        pjrt = walk(pjrt_args, "pjrt")
        print("on pjrt:")
        print_totals(pjrt, [PJRT_DTYPE])
    out = args.out or (None if args.ops else os.path.join(ROOT, "docs", "ops.md"))
    if out:
        write_markdown(results, dtypes, out, pjrt)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
