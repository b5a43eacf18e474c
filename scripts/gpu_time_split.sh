#!/usr/bin/env bash
# Where the stateful campaign's and the wide runner's time goes, on a CUDA machine (one call):
#   bash scripts/gpu_time_split.sh LOGDIR
# A: the wide runner, then the stateful campaign at 256 examples (its first run on the machine:
# it compiles the Triton kernels); B: the campaign at 1,024 examples (the time split of
# benchmarks/fuzz_throughput.py's JSON: start-up, busy, tail per worker); C: the wide runner
# under cProfile and worker 0's share in one process under cProfile (LOGDIR/prof: *.prof and
# the merged text wide_profile.txt, worker_profile.txt). Sizes: SYSTEMS (256), JOBS (min(16, nproc)).
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: bash scripts/gpu_time_split.sh LOGDIR" >&2; exit 2; }
ROOT=$(pwd)
mkdir -p "$1/prof" && LOG=$(cd "$1" && pwd) || exit 2
source "$ROOT/scripts/gpu_env.sh" || exit 2
JOBS=${JOBS:-$(( $(nproc) > 16 ? 16 : $(nproc) ))}
B="python3 -P $ROOT/benchmarks/fuzz_throughput.py --device cuda --systems ${SYSTEMS:-256} --jobs $JOBS --stateful-steps 12"
W="--rows 4096 --steps 40 --wide-jobs 8"
cd /tmp
run() { local name=$1 limit=$2; shift 2; SECONDS=0
  timeout "$limit" $B "$@" --out "$LOG/$name.json" > "$LOG/$name.log" 2>&1; echo "$name: exit $?, ${SECONDS}s"; }
run split_a 200 --stateful-examples 256 $W
run split_b 170 --stateful-examples 1024 --no-wide
run split_c 200 --stateful-examples 256 $W --profile "$LOG/prof"
