"""Time to the first training step of a fresh process: with an empty persistent compile cache
(cold: every program is compiled) and with the directory a previous process filled (warm: they
are loaded), side by side, each measured in its own new process.

    python benchmarks/bench_cache.py [--models char_gpt,llama,resnet18] [--modes strict,fused] [--runs 3]

The time counted is from the start of the step loop to the end of the first step (imports and
model construction excluded, so what differs is compiling vs loading); the table shows the
median of --runs processes each way, with the compiles and cache loads they did.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, os.path.join(%r, "benchmarks")); sys.path.insert(0, os.path.join(%r, "examples"))
    import torch, torch_tpu
    import bench_models as bm
    name, mode = sys.argv[1], sys.argv[2]
    torch.set_num_threads(2); torch_tpu._C._set_num_threads(2)
    case = next(c for c in bm.CASES if c.name == name and c.what == "train")
    step = case.build("tpu")
    torch_tpu.set_eager_mode(mode)
    t0 = time.perf_counter()
    step(); torch.tpu.synchronize()
    first = time.perf_counter() - t0
    s = torch_tpu.compile_cache.stats()
    print(json.dumps({"first": first, "compiles": s["compiles"], "loads": s["disk_hits"],
                      "compile_s": s["compile_time_s"]}))
""")


def run(root: str, name: str, mode: str, cache_dir: str) -> dict:
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run([sys.executable, "-c", CHILD % (root, root), name, mode], env=env, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="char_gpt,llama,resnet18")
    p.add_argument("--modes", default="strict,fused")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"{'model':<10} {'mode':<7} {'cold first step':>16} {'compiles':>9} {'compiling':>10} "
          f"{'warm first step':>16} {'loads':>6} {'speedup':>8}")
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            cold, warm = [], []
            for _ in range(args.runs):
                d = tempfile.mkdtemp(prefix="tpu_bench_cache_")
                try:
                    cold.append(run(root, name, mode, d))
                    warm.append(run(root, name, mode, d))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
            c = statistics.median(r["first"] for r in cold)
            w = statistics.median(r["first"] for r in warm)
            comp = statistics.median(r["compile_s"] for r in cold)
            print(f"{name:<10} {mode:<7} {c * 1e3:>14.1f}ms {cold[0]['compiles']:>9} {comp * 1e3:>8.1f}ms "
                  f"{w * 1e3:>14.1f}ms {warm[0]['loads']:>6} {c / w:>7.2f}x", flush=True)
    print("\ncold: an empty TORCH_TPU_CACHE_DIR; warm: the directory the cold process left; compiling: the "
          "time the cold\nprocess spent compiling (what the warm one saves, less reading the entries)")


if __name__ == "__main__":
    main()
