#!/usr/bin/env bash
# Regenerates the README's benchmark table and charts on this machine (about 30-40 minutes).
#   bash benchmarks/make_results.sh [extra pypto bench options, e.g. an op name]
# Writes benchmarks/results/cpu.json (everything measured), the README table between the
# <!-- bench:start/end --> markers, and the PNG charts in benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results
mkdir -p "$out"
pypto bench --compare numpy,torch,torch-compile,halide --roofline --memory --compile-cost \
  --json "$out/cpu.json" --readme README.md --plot "$out/speedups.png" \
  --roofline-plot "$out/roofline.png" --markdown "$@"
# How the tuner converged on the shipped schedules (needs the study database `pypto tune` wrote).
if [ -f pypto_tune.db ]; then
  pypto study --storage pypto_tune.db --json "$out/tuning.json" --plot "$out/convergence.png"
fi
