#!/usr/bin/env bash
# torchtitan's own trainer on 2 tpu ranks under torchrun, then the same job on the CPU with Gloo,
# and their losses side by side (README "torchtitan").
#
#   bash scripts/torchtitan.sh [llama3|qwen3] [fsdp|tp] [STEPS]       (default: llama3 fsdp 10)
#
# Sets up first (scripts/setup.sh: the venv, torchtitan in $TORCH_TPU_TITAN_DIR, the build), writes
# the stand-in tokenizer and dataset (examples/torchtitan_assets.py), makes one seed checkpoint on
# the CPU that both runs load (the tpu generator draws other numbers than the CPU's), then runs
# examples/torchtitan_tpu.py with --device tpu and --device cpu. Parameters stay float32 so the
# two runs differ only by rounding; everything else is the debug config's (its fused AdamW, its
# warm-up schedule), at seq_len 256 and 2 sequences per rank for this 2-core machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model=${1:-llama3}
parallel=${2:-fsdp}
steps=${3:-10}
case $model in llama3|qwen3) ;; *) echo "model: llama3 or qwen3, not $model"; exit 2 ;; esac
case $parallel in
  fsdp) layout=(--parallelism.data_parallel_shard_degree 2) ;;
  tp) layout=(--parallelism.data_parallel_shard_degree 1 --parallelism.tensor_parallel_degree 2) ;;
  *) echo "parallelism: fsdp or tp, not $parallel"; exit 2 ;;
esac

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
py="$TORCH_TPU_VENV/bin/python"
work=$(mktemp -d /tmp/torchtitan.XXXXXX)
export PYTHONPATH="$TORCH_TPU_TITAN_DIR${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1
"$py" examples/torchtitan_assets.py "$work/assets" >/dev/null
common=(--module "$model" --config "${model}_debugmodel" --hf_assets_path "$work/assets/tokenizer"
        --dataloader.dataset_path "$work/assets/c4_test" --dump_folder "$work/dump"
        --parallelism.spmd_backend partial_dtensor --debug.seed 42)
launch() {  # launch NPROC DEVICE ARGS...
  local n=$1 dev=$2
  shift 2
  "$py" -m torch.distributed.run --standalone --nproc_per_node "$n" examples/torchtitan_tpu.py --device "$dev" \
    "${common[@]}" "$@"
}

echo "[torchtitan] $model ${model}_debugmodel, $parallel on 2 ranks, $steps steps; work folder $work"
launch 1 cpu --parallelism.data_parallel_shard_degree 1 --checkpoint.enable --checkpoint.create_seed_checkpoint \
  --checkpoint.folder "$work/seed" >"$work/seed.log" 2>&1 || { tail -30 "$work/seed.log"; exit 1; }
for dev in tpu cpu; do
  echo "[torchtitan] $dev run (log: $work/$dev.log)"
  launch 2 "$dev" --loss-file "$work/$dev.jsonl" "${layout[@]}" --training.seq_len 256 \
    --training.local_batch_size 2 --training.steps "$steps" --training.mixed_precision_param float32 \
    --checkpoint.enable --checkpoint.load_only --checkpoint.folder "$work/ckpt_$dev" \
    --checkpoint.initial_load_path "$work/seed/step-0" >"$work/$dev.log" 2>&1 || { tail -30 "$work/$dev.log"; exit 1; }
done
"$py" - "$work" <<'EOF'
import json, sys
rows = {d: [json.loads(l) for l in open(f"{sys.argv[1]}/{d}.jsonl")] for d in ("tpu", "cpu")}
steps = {d: [r for r in rows[d] if "step" in r] for d in rows}
print(f"{'step':>4} {'tpu loss':>12} {'cpu/gloo loss':>14} {'rel diff':>9} {'tpu s':>7} {'cpu s':>7}")
worst = 0.0
for t, c in zip(steps["tpu"], steps["cpu"]):
    rel = abs(t["loss"] - c["loss"]) / abs(c["loss"])
    worst = max(worst, rel)
    print(f"{t['step']:>4} {t['loss']:>12.7f} {c['loss']:>14.7f} {rel:>9.1e} {t['seconds']:>7.2f} {c['seconds']:>7.2f}")
mean = lambda d: sum(r["seconds"] for r in steps[d][1:]) / max(1, len(steps[d]) - 1)
fallback = next((r["fallback_ops"] for r in rows["tpu"] if "fallback_ops" in r), {})
print(f"max relative loss difference {worst:.1e}; s/step after the first: tpu {mean('tpu'):.2f}, "
      f"cpu/gloo {mean('cpu'):.2f}; tpu ops on the CPU fallback: {fallback or 'none'}")
EOF
