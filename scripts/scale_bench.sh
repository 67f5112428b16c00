#!/usr/bin/env bash
# The scaling benchmark (docs/numbers.md, "The scaling benchmark"): N load workers, N = 1, 2, 4, 8, 16 (as
# many as the machine has cores), each with the same streams, against N times one worker's tokens/s
# (the goal: within ±5 %). benchmarks/bench_scale.py lays the cores out per row (the controller on one,
# each worker on its own, fresh simulator processes (two a worker), fast preset, on the cores left over; a row
# with no core left says "shared") and prints the table: achieved/ideal, N x one, scaling, the workers'
# CPU, the simulators' own TTFT p99.
#
# Offline and bounded: it runs only what the checkout carries with the package already installed
# (`pip install -e .`, once), talks to nothing beyond 127.0.0.1, and stops after SCALE_BUDGET_S (default
# 1,200 s; printing the rows so far), killed outright 60 s later if it is still running.
#
#   scripts/scale_bench.sh                                   # 1,2,4,8,16 workers x 256 streams, 8 s a row
#   WORKERS=1,2 STREAMS=256 SECONDS_PER_ROW=8 scripts/scale_bench.sh
#   SIMS_PER_WORKER=3 scripts/scale_bench.sh                 # more simulator processes per worker
#   scripts/scale_bench.sh --ray                             # ramp selftest's rows, the workers as Ray actors
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python -c 'import loadgen.cli' 2>/dev/null; then
    echo "scale_bench: llm-ramp is not installed here: run 'pip install -e .' once (online), then again" >&2
    exit 2
fi
budget=${SCALE_BUDGET_S:-1200}
echo "scale_bench: $(python -c 'import os; print(len(os.sched_getaffinity(0)))') cores," \
    "$(python -c 'import platform; print(platform.processor() or platform.machine())')"
if [ "${1:-}" = "--ray" ]; then
    exec timeout -k 60 "$budget" python -m loadgen.cli selftest --workers "${WORKERS:-1,2,4,8}" \
        --streams "${STREAMS:-512}" --per-worker --seconds "${SECONDS_PER_ROW:-6}" "$@"
fi
exec timeout -k 60 "$((budget + 60))" python benchmarks/bench_scale.py --workers "${WORKERS:-1,2,4,8,16}" \
    --streams "${STREAMS:-256}" --seconds "${SECONDS_PER_ROW:-8}" \
    --sims-per-worker "${SIMS_PER_WORKER:-2}" --budget-s "$budget" "$@"
