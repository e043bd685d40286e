#!/bin/bash
# One lent NVIDIA GPU session for issue 14 point 5 (figures in bench/RESULTS.md): the CUDA checks
# and GEMM vs cuBLAS (gpu_check.py), ResNet-18's 3x3 convs tuned vs cuDNN (gpu_tune_conv.py),
# then the three models at batch 1 and 16 with that log vs torch eager (gpu_models.py).
#
#   OUT=/some/dir bash bench/gpu_session.sh [tune trials per layer, default 64]
#
# Environment: GPU_CHECK=0 skips gpu_check.py, TUNE=0 the tuning; LAYERS (default 56,28,14,7) the 3x3 layers to
# tune; PRIOR_LOG a tuning log of an earlier session to resume from (copied to $OUT/conv.log);
# BATCHES (default 1,16) and MODELS (default all three) for gpu_models.py; PROFILE=N adds its
# per-node profile (N slowest nodes); TUNE_TIMEOUT (default 190 s) bounds the tuning; CUDA_GRAPH
# (default both: plain launches and CUDA graphs, a row each) and TORCH_COMPILE (modes of
# torch.compile to time beside eager torch, e.g. default,reduce-overhead; default none) for
# gpu_models.py. Issue 29's sections (each skipped with its variable set to 0): GEMM
# (bench/gpu_gemm.py: dense.cuda's fp32 SIMT GEMM and variants vs cuBLAS), TENSORCORE
# (bench/gpu_tensorcore.py: wmma fp16/bf16 GEMM vs cuBLAS; TC_SIZES, default 1024,4096,8192),
# CONV (bench/gpu_conv_defaults.py: ResNet-18's conv layers, old/new direct fallback, Winograd,
# cuDNN), MIXED (bench/gpu_mixed_precision.py: ToMixedPrecision float16 vs float32 vs torch
# autocast), DYNAMIC (bench/gpu_dynamic.py: dynamic-batch VM on cuda vs static builds, with the
# variants plain / direct / hint16 of a run-time batch), WINO_PRE (bench/gpu_models.py
# --winograd-pre both: ResNet-18 at batch 1 and 16 with the GPU Winograd weights transformed at
# build time vs inside the operator, alternating rounds, plain launches and CUDA graphs, eager
# torch in the same run; ~60-90 s, bounded by 170 s; WINO_PRE=only runs the setup and this
# section alone, the call for a short device session). GPU_MODELS=0 skips gpu_models.py. The
# session of 2026-11-30: `OUT=... TUNE=0 PROFILE=6 bash bench/gpu_session.sh`. The dynamic batch
# alone (issue 29 point 3, ~3-4 min): `OUT=... GPU_CHECK=0 GEMM=0 TENSORCORE=0 CONV=0 MIXED=0
# TUNE=0 GPU_MODELS=0 WINO_PRE=0 bash bench/gpu_session.sh`.
#
# The device machine has python3 with torch/numpy/onnx/onnxruntime but no network: llvmlite
# 0.50 (as tested here) travels as .whl/llvmlite-0.50.0-cp312.tar.xz (the wheel's files, xz:
# the wheel itself is over the transfer limit) and xgboost-cpu as its wheel; both go to
# /tmp/site. Every section has its own time limit; one failing does not stop the next. All
# output goes to $OUT/session.log, the figures to $OUT/*.json, the tuning log to $OUT/conv.log.
set -u
OUT=${OUT:-/tmp/gpu_session}
TRIALS=${1:-64}
LAYERS=${LAYERS:-56,28,14,7}
BATCHES=${BATCHES:-1,16}
MODELS=${MODELS:-resnet18,mobilenet_v2,bert_encoder}
mkdir -p "$OUT" /tmp/site
if [ -n "${PRIOR_LOG:-}" ]; then cp "$PRIOR_LOG" "$OUT/conv.log"; fi
LOG="$OUT/session.log"
say() { echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

say "setup"
if [ -f .whl/llvmlite-0.50.0-cp312.tar.xz ]; then
  tar xJf .whl/llvmlite-0.50.0-cp312.tar.xz -C /tmp/site
fi
ls .whl/xgboost*.whl >/dev/null 2>&1 &&
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/xgboost*.whl >>"$LOG" 2>&1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
for lib in /usr/local/cuda/nvvm/libdevice/libdevice.10.bc \
           $(timeout 20 find /usr/local /opt -name 'libdevice.10.bc' 2>/dev/null | head -1); do
  if [ -f "$lib" ]; then export TVMPY_LIBDEVICE="$lib"; break; fi
done
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import sys, llvmlite, numpy, onnx, onnxruntime as o, torch
print(sys.version.split()[0], 'llvmlite', llvmlite.__version__, 'numpy', numpy.__version__,
      'onnx', onnx.__version__, 'onnxruntime', o.__version__, o.get_available_providers(),
      'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())
from tvmpy.contrib import nvcc; from tvmpy.codegen import nvptx
print('nvrtc', nvcc.find_nvrtc(), nvcc.nvrtc_version(), 'ptxas', nvcc.find_ptxas())
print('libdevice', nvptx.find_libdevice())"
  python3 -c "import xgboost; print('xgboost', xgboost.__version__)"
  nproc; uptime
} >>"$LOG" 2>&1
cat "$LOG"

wino_pre() {
  say "Winograd weights at build time vs in the operator (ResNet-18 A/B)"
  timeout 170 python3 bench/gpu_models.py --target cuda --models resnet18 --batches 1,16 \
    --winograd-pre both --number 10 --repeat 6 --cuda-graph both --tune-log "$OUT/conv.log" \
    --json "$OUT/gpu_winograd_pre.json" 2>&1 | grep -v "^autotvm:\|UserWarning\|return \[fcompute" |
    tee -a "$LOG"
}
if [ "${WINO_PRE:-1}" = only ]; then wino_pre; say "done"; exit 0; fi

if [ "${GPU_CHECK:-1}" != 0 ]; then
  say "gpu_check"
  timeout 120 python3 bench/gpu_check.py --sizes 1024,4096 --out "$OUT/gpu_check.json" 2>&1 |
    tee -a "$LOG"
fi

if [ "${GEMM:-1}" != 0 ]; then
  say "gemm fp32 (dense.cuda)"
  timeout 150 python3 bench/gpu_gemm.py --out "$OUT/gpu_gemm.json" 2>&1 | grep -v "^autotvm:" |
    tee -a "$LOG"
fi

if [ "${TENSORCORE:-1}" != 0 ]; then
  say "tensor cores (wmma)"
  timeout 180 python3 bench/gpu_tensorcore.py --sizes "${TC_SIZES:-1024,4096,8192}" \
    --out "$OUT/gpu_tensorcore.json" 2>&1 | grep -v "^autotvm:" | tee -a "$LOG"
fi

if [ "${CONV:-1}" != 0 ]; then
  say "conv defaults (ResNet-18 layers)"
  timeout 180 python3 bench/gpu_conv_defaults.py --json "$OUT/gpu_conv_defaults.json" 2>&1 |
    grep -v "^autotvm:" | tee -a "$LOG"
fi

if [ "${TUNE:-1}" != 0 ]; then
  say "tune conv (trials $TRIALS per layer)"
  timeout "${TUNE_TIMEOUT:-190}" python3 bench/gpu_tune_conv.py --target cuda --layers "$LAYERS" --trials "$TRIALS" \
    --number 10 --repeat 5 --log "$OUT/conv.log" --json "$OUT/tune.json" 2>&1 |
    grep -v "UserWarning\|return \[fcompute" | tee -a "$LOG"
fi

if [ "${GPU_MODELS:-1}" != 0 ]; then
say "models"
timeout 200 python3 bench/gpu_models.py --target cuda --batches "$BATCHES" --models "$MODELS" \
  --number 10 --repeat 5 --profile "${PROFILE:-0}" --tune-log "$OUT/conv.log" \
  --cuda-graph "${CUDA_GRAPH:-both}" --torch-compile "${TORCH_COMPILE:-}" \
  --json "$OUT/gpu_models.json" 2>&1 |
  grep -v "UserWarning\|return \[fcompute" | tee -a "$LOG"
fi

if [ "${MIXED:-1}" != 0 ]; then
  say "mixed precision (ToMixedPrecision float16)"
  timeout 180 python3 bench/gpu_mixed_precision.py --json "$OUT/gpu_mixed_precision.json" 2>&1 |
    grep -v "^autotvm:" | tee -a "$LOG"
fi

if [ "${DYNAMIC:-1}" != 0 ]; then
  say "dynamic batch (VM on cuda)"
  timeout 300 python3 bench/gpu_dynamic.py --number 5 --repeat 3 --json "$OUT/gpu_dynamic.json" \
    2>&1 | grep -v "^autotvm:" | tee -a "$LOG"
fi
if [ "${WINO_PRE:-1}" != 0 ]; then wino_pre; fi
say "done"
