#!/usr/bin/env bash
# Measured GPU profiles of the zoo models and engine runs over NCCL, in one call on one GPU.
#
# On the GPU machine, from the repository root (what docs/results/2026-11-27-gpu-profiles.md
# records was run exactly so, with the wheels of the missing packages in .whl/):
#   OUT=/some/dir bash benchmarks/gpu_profile_run.sh > $OUT/log.txt 2>&1
# ONLY="run-tiny-2stage-gpu ..." runs only the steps named. A dry run of every command on a CPU-only machine (small tables, no links, fewer steps):
#   DEV=cpu QUICK=1 PY=.venv/bin/python OUT=/tmp/gp PROF_OUT=/tmp/gp/prof \
#       bash benchmarks/gpu_profile_run.sh
#
# Writes under $OUT: summary.txt (one line per step: rc and seconds) and results.tar
# (the profiles, the run folders' result.json and torchrun.log, each command's output), rebuilt after every
# step so that a call cut short still returns what was done. Every step has its own timeout
# (cut to the time left of BUDGET_S) and is skipped when less is left than it expects.
set -x
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT}
DEV=${DEV:-cuda:0}
QUICK=${QUICK:-0}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-500}
PROF_OUT=${PROF_OUT:-traces/profiles}
WORK=${WORK:-/tmp/gpu-run}
mkdir -p "$OUT" "$WORK/plans" "$WORK/runs" "$WORK/logs" "$PROF_OUT"
rm -rf "$WORK/runs"/*
T0=$SECONDS

# --- packages the device image lacks travel as wheels in .whl/ -------------------------------
if compgen -G ".whl/*.whl" > /dev/null && [ "${WHEELS:-1}" = 1 ]; then
  timeout 120 $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || echo "WHEELS FAILED"
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
HX="$PY -m heterps_exec.cli"
export NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=lo  # one node: bootstrap over loopback

# --- what machine this is -----------------------------------------------------------------------
{
  date -u +%Y-%m-%dT%H:%M:%SZ; uname -a; echo "nodename $(uname -n)"; nproc; free -g | head -2
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit \
    --format=csv 2>&1
  timeout 60 $PY - <<'EOF'
import platform, torch, numpy, simpy, pydantic
print("python", platform.python_version(), "torch", torch.__version__, "numpy", numpy.__version__,
      "simpy", simpy.__version__, "pydantic", pydantic.VERSION)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpu", p.name,
          "sms", p.multi_processor_count, "mem_gib", round(p.total_memory / 2**30, 1))
EOF
} 2>&1 | tee "$WORK/logs/machine.txt"

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$GPU_NAME" in  # the catalog row of the lent card (heterps_sim/inputs/data/resource_catalog.csv)
  *H200*) GPU_TYPE=h200-141gb-sxm ;;
  *H100*NVL*) GPU_TYPE=h100-94gb-nvl ;;
  *H100*PCIe*) GPU_TYPE=h100-80gb-pcie ;;
  *H100*) GPU_TYPE=h100-80gb-sxm ;;
  *) GPU_TYPE=h100-80gb-sxm ;;  # CPU dry run: any GPU row of the catalog
esac
echo "GPU_NAME=$GPU_NAME GPU_TYPE=$GPU_TYPE" | tee -a "$WORK/logs/machine.txt"

pack() {  # everything so far, atomically, into $OUT/results.tar
  tar -cf "$OUT/results.tmp" -C "$PROF_OUT" . -C "$WORK" logs plans \
    $(cd "$WORK" && ls runs/*/result.json runs/*/torchrun.log 2>/dev/null) 2>/dev/null
  mv -f "$OUT/results.tmp" "$OUT/results.tar"
}

step() {  # step NAME EXPECT_S LIMIT_S COMMAND...: skipped when less than EXPECT_S is left
  local name=$1 expect=$2 limit=$3; shift 3
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi  # ONLY="step ..."
  local left=$((BUDGET_S - (SECONDS - T0)))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt "$expect" ]; then
    echo "$name SKIPPED (${left}s left of ${BUDGET_S}s, expects ${expect}s)" >> "$OUT/summary.txt"
    return
  fi
  local t=$SECONDS
  timeout -k 10 "$limit" "$@" > "$WORK/logs/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t))s (limit ${limit}s)" >> "$OUT/summary.txt"
  tail -n 25 "$WORK/logs/$name.txt"
  pack
}

# --- plans: every layer of the scenario's model, cut where each run needs it --------------------
timeout 60 $PY - "$WORK/plans" "$DEV" "$GPU_TYPE" <<'EOF'
import json, sys
from pathlib import Path
from heterps_sim.inputs import zoo
out, dev, gpu = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
tiny = [n.name for n in zoo.model_graph("tiny-ctr").nodes]
ctr = [n.name for n in zoo.model_graph("ctr-dnn").nodes]
cut = tiny.index("concat")

def plan(stages, m=4, schedule="1f1b"):
    return {"format_version": 1, "num_microbatches": m, "schedule": schedule,
            "stages": [{"layers": ls, "resource": r, "num_replicas": k} for ls, r, k in stages]}

plans = {
    "tiny-1stage-gpu": plan([(tiny, "t4", 1)]),
    "tiny-2stage-gpu": plan([(tiny[:cut], "t4", 1), (tiny[cut:], "t4", 1)]),
    "tiny-dp2-gpu": plan([(tiny, "t4", 2)]),
    "tiny-2stage-gpu-cpu": plan([(tiny[:cut], "t4", 1), (tiny[cut:], "xeon-icelake-16vcpu", 1)]),
    "ctr-dnn-1stage-gpu": plan([(ctr, gpu, 1)]),
}
for name, p in plans.items():
    (out / f"{name}.json").write_text(json.dumps(p, indent=1) + "\n")
(out / "gpu.yaml").write_text(f'types:\n  t4: {{device: "{dev}"}}\n  {gpu}: {{device: "{dev}"}}\n'
                              'default: {device: cpu}\n')
print("plans:", ", ".join(sorted(plans)))
EOF
P=$WORK/plans
R=$WORK/runs

if [ "$QUICK" = 1 ]; then
  LINKS=--no-links; BIG="--table-scale 0.01"; MID="--table-scale 0.01"; REP=3
  ZOO_B=64,256; TINY_B=16,64,256; STEPS=4; WARM=1; ZOO="matchnet"
else
  LINKS=""; BIG="--table-scale 0.1"; MID="--table-scale 0.25"; REP=25
  ZOO_B=256,1024,4096; TINY_B=16,64,256,1024; STEPS=40; WARM=5; ZOO="matchnet nce 2emb wide-deep dlrm"
fi

# --- 1. the model of the engine runs first, with this host's gloo links ---------------------
step profile-tiny-ctr 60 240 $HX profile --model tiny-ctr --device "$DEV" --batch "$TINY_B" \
  --repeats "$REP" $LINKS --out "$PROF_OUT"
step profile-ctr-dnn 20 90 $HX profile --model ctr-dnn --device "$DEV" --batch "$ZOO_B" \
  --repeats "$REP" --no-links --out "$PROF_OUT"

# --- 2. engine runs: predicted beside measured ---------------------------------------------------
RUN="$HX run --steps $STEPS --warmup-steps $WARM --rank-timeout 45 --timeout 100"
step run-tiny-1stage-gpu 40 130 $RUN "$P/tiny-1stage-gpu.json" --scenario scenarios/exec-tiny.yaml \
  --binding "$P/gpu.yaml" --out "$R/tiny-1stage-gpu"
# two ranks on one GPU: NCCL may refuse them (one device per rank), so a short leash
RUN2="$HX run --steps $STEPS --warmup-steps $WARM --rank-timeout 30 --timeout 60"
step run-tiny-2stage-gpu 30 75 $RUN2 "$P/tiny-2stage-gpu.json" --scenario scenarios/exec-tiny.yaml \
  --binding "$P/gpu.yaml" --out "$R/tiny-2stage-gpu"
step run-tiny-dp2-gpu 30 75 $RUN2 "$P/tiny-dp2-gpu.json" --scenario scenarios/exec-tiny.yaml \
  --binding "$P/gpu.yaml" --out "$R/tiny-dp2-gpu"
step run-ctr-dnn-1stage-gpu 40 130 $RUN "$P/ctr-dnn-1stage-gpu.json" \
  --scenario scenarios/ctr-dnn-64types.yaml --binding "$P/gpu.yaml" \
  $([ "$QUICK" = 1 ] && echo "--table-scale 0.01") --out "$R/ctr-dnn-1stage-gpu"

# --- 3. the other zoo models (big tables scaled down so the call fits) ---------------------------
for m in $ZOO; do
  case $m in dlrm) S=$BIG ;; 2emb|wide-deep) S=$MID ;; *) S="" ;; esac
  step "profile-$m" 25 120 $HX profile --model "$m" --device "$DEV" --batch "$ZOO_B" \
    --repeats "$REP" $S --no-links --out "$PROF_OUT"
done

# --- 4. a mixed run: embeddings on the GPU, the MLP on the host CPU (gloo) ----------------------
step run-tiny-2stage-gpu-cpu 40 130 $RUN "$P/tiny-2stage-gpu-cpu.json" \
  --scenario scenarios/exec-tiny.yaml --binding "$P/gpu.yaml" --out "$R/tiny-2stage-gpu-cpu"

echo "total $((SECONDS - T0))s" >> "$OUT/summary.txt"
pack
cat "$OUT/summary.txt"
