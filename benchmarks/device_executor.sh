#!/usr/bin/env bash
# The executor benchmark (issue 30, ExecPlan 020) on a bare 16-core Linux machine with Python 3.12 (numpy, aiohttp
# and httpx installed; no LiteLLM, no Dask, no network). The wheels come in .whl/ at the repository root, fetched
# beforehand on a machine with the registry (every wheel the run, its workers, bare LiteLLM and the scheduler import):
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl -r benchmarks/device_executor.wheels
#
# Run from anywhere: `bash benchmarks/device_executor.sh`; about 8-9 minutes on 16 cores. The figures go to stdout
# and, when $OUT is set, to $OUT/bench_executor.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
export LITELLM_LOCAL_MODEL_COST_MAP=True
out="${OUT:-/tmp}/bench_executor.txt"
{
  echo "python $(python3 -c 'import sys; print(sys.version.split()[0])'), $(nproc) cores, $(uname -r)"
  # 6,000 calls a side: the threads engine and dask 1 take ~35-45 s each at LiteLLM's ~170 calls/s; four server
  # processes (at latency 0 they are part of the limit for eight workers: the second part); 256 calls in flight for dask 8 (32 a worker), 64 for threads.
  timeout 330 python3 benchmarks/bench_executor.py --calls 6000 --workers 1,2,4,8 --servers 4 --latency 0 \
    --concurrency 64 --per-worker 32 --bare-threads 64 --ceiling-calls 20000
  # Eight servers, so that they are less of the limit: at latency 0, and at 20 ms (the issue's setting for its
  # figure of eight bare LiteLLM processes). About 2 minutes each.
  for latency in 0 0.02; do
    timeout 200 python3 benchmarks/bench_executor.py --calls 6000 --workers 8 --servers 8 --latency "$latency" \
      --concurrency 64 --per-worker 32 --bare-threads 64 --skip ceiling
  done
} 2>&1 | tee "$out"
