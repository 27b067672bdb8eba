#!/usr/bin/env bash
# The whole paper (default) or the offline demo (--quick).
#   ./run_all.sh --quick   every method x 5 seeds on scikit-learn digits (CPU, minutes)
#   ./run_all.sh           3 datasets x 3 backbones x every method x 5 seeds (GPU, data needed)
# Idempotent: finished runs are skipped, so a second call does no training.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
BENCH=.venv/bin/bench
RESULTS=${RESULTS:-results}

if [ "${1:-}" = "--quick" ]; then
    "$BENCH" run --method sl1h --dataset digits --seeds 5 --profile quick --results "$RESULTS"
    "$BENCH" report --results "$RESULTS" --out "${REPORTS:-reports}" --dataset digits
    exit 0
fi

for dataset in chaoyang kvasir pathmnist; do
    for backbone in resnet50 convnext_tiny swin_tiny; do
        "$BENCH" run --method sl1h --dataset "$dataset" --backbone "$backbone" \
            --seeds 5 --profile paper --pretrained-if-needed --results "$RESULTS"
    done
done
"$BENCH" report --results "$RESULTS" --out "${REPORTS:-reports}"
