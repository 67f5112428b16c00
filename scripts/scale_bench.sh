#!/usr/bin/env bash
# The scaling benchmark (docs/numbers.md): `ramp selftest` grows the load workers 1, 2, 4, 8 ... as far
# as the machine has a core for each (plus one for the controller and at least one for a simulator), each
# worker with the same streams, against one simulator fast-mode process per core left over, served as one
# multi-URL target. One short run; it prints the table (achieved/ideal, scaling: N workers' tokens/s over N
# times one worker's, CPU-s per 1M tokens, TTFT error, the simulators' own TTFT) and a line per worker count
# against the goal (scaling >= 0.95 while the simulators keep up).
#
# Offline: it runs only what the checkout carries with the package already installed (`pip install -e .`,
# once); it installs nothing and talks to nothing beyond 127.0.0.1.
#
#   scripts/scale_bench.sh              # local worker processes
#   scripts/scale_bench.sh --ray        # the same workers as Ray actors on a local Ray (extra: ray)
#   WORKERS=1,2 STREAMS=256 SECONDS_PER_ROW=8 scripts/scale_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python -c 'import loadgen.cli' 2>/dev/null; then
    echo "scale_bench: llm-ramp is not installed here: run 'pip install -e .' once (online), then again" >&2
    exit 2
fi
cores=$(python -c 'import os; print(len(os.sched_getaffinity(0)))')
workers=1
for w in 2 4 8 16 32; do
    if [ $((w + 2)) -le "$cores" ]; then
        workers="$workers,$w"
    fi
done
echo "scale_bench: $cores cores, $(python -c 'import platform; print(platform.processor() or platform.machine())'), workers ${WORKERS:-$workers}"
exec python -m loadgen.cli selftest --workers "${WORKERS:-$workers}" --streams "${STREAMS:-512}" --per-worker \
    --seconds "${SECONDS_PER_ROW:-6}" "$@"
