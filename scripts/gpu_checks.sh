#!/usr/bin/env bash
# Every check that needs a CUDA device, in one run, for a session that is lent a GPU
# (CI has none: these tests skip there). Writes one log per part under $OUT (default
# gpu-results/) and a summary of exit codes; the figures go into README.md with the date
# and the device.
#
#   OUT=/tmp/gpu bash scripts/gpu_checks.sh          # about 8-10 minutes on an H200
#
# Parts: the CUDA tests (event timing against torch.profiler's kernel times, memory
# against the caching allocator, plans against torch.cuda.max_memory_allocated, compare's
# fp16/bf16/compile rows), then the benchmarks' CUDA modes (trace overhead, memory
# overhead, plan accuracy, optimize). The core imports without the widget stack, so the
# device image's torch, lightning, PyG and onnxruntime are enough; nothing is installed.
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
summary="$OUT/summary.txt"
: >"$summary"

run() {  # run NAME SECONDS CMD...: keep its log and exit code, go on whatever happens
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s: $*" >>"$summary"
  tail -n 3 "$OUT/$name.log" | sed "s/^/  $name | /" >>"$summary"
}

run env 60 python -c "import torch, labkit; print(torch.__version__, torch.cuda.get_device_name(0), labkit.__file__)"
run nvidia-smi 30 nvidia-smi
run tests 300 python -m pytest -q -p no:cacheprovider -o addopts="--import-mode=importlib" \
  tests/trace/test_timing_cuda.py tests/memory/test_memory_cuda.py tests/plan/test_plan_cuda.py \
  tests/optimize/test_compare.py tests/memory/test_memory_tracker.py tests/trace/test_recorder.py \
  tests/plan/test_plan_kernels.py \
  -m cuda -rA
run trace_overhead 150 python -m benchmarks.trace_overhead --device cuda --rounds 5
run memory_overhead 120 python -m benchmarks.memory_overhead --device cuda --rounds 5
run plan 150 python -m benchmarks.plan --device cuda
run optimize 200 python -m benchmarks.optimize --cuda --quick
cat "$summary"
