#!/usr/bin/env bash
# Regenerates the README's benchmark section on this machine (about 20 minutes on 2 cores).
#   bash benchmarks/make_results.sh [extra pypto bench options, e.g. op names]
# Writes benchmarks/results/ (cpu.json with everything measured, the PNG charts, the memory
# studies) and fills the README blocks between <!-- NAME:start --> and <!-- NAME:end -->.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results
mkdir -p "$out"

pypto bench --compare numpy,torch,torch-compile,halide --roofline --memory --compile-cost \
  --json "$out/cpu.json" --readme README.md --plot "$out/speedups.png" \
  --roofline-plot "$out/roofline.png" --markdown "$@"

for study in attention elementwise; do
  python -m pypto.bench.memory study "$study" "$out/memory_$study.json" | tee "$out/memory_$study.txt"
done

# The tuner's convergence needs the Optuna studies `pypto tune` wrote (pypto_tune.db).
if [ -f pypto_tune.db ]; then
  pypto study --storage pypto_tune.db --json "$out/tuning.json" --plot "$out/convergence.png" \
    | tee "$out/tuning.txt"
fi

python - "$out" <<'PY'
import os, sys
from pypto.cli.bench import replace_block
out = sys.argv[1]
for block, name in (("memory-attention", "memory_attention.txt"),
                    ("memory-elementwise", "memory_elementwise.txt"), ("study", "tuning.txt")):
    path = os.path.join(out, name)
    if os.path.exists(path):
        replace_block("README.md", block, "```\n" + open(path).read().rstrip() + "\n```")
PY
