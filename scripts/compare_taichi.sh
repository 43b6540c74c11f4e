#!/usr/bin/env bash
# Times Taichi 1.7.4's own mpm99 and mpm3d (64^3) next to this engine's, on the CPU and on
# Vulkan, three alternating runs each. Taichi goes into a virtual environment under target/.
# Not part of the tests: run it on a quiet machine, e.g. `bash scripts/compare_taichi.sh`;
# `--big` adds mpm3d at 128^3 on the CPU (524,288 particles, two alternating runs of 20
# substeps after 10 of warm-up; several minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/taichi-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q taichi==1.7.4
fi
cargo build --release --example mpm99 --example mpm3d
for run in 1 2 3; do
    for arch in cpu vulkan; do
        "$venv/bin/python" scripts/taichi_bench.py mpm99 "$arch" 2000 100 | grep RESULT
        ./target/release/examples/mpm99 --backend "$arch" --bench --steps 2000 | grep -E "ms/substep"
        "$venv/bin/python" scripts/taichi_bench.py mpm3d "$arch" 100 100 | grep RESULT
        ./target/release/examples/mpm3d --backend "$arch" --bench --steps 100 | grep -E "ms/substep"
    done
done
if [ "${1:-}" = --big ]; then
    for run in 1 2; do
        "$venv/bin/python" scripts/taichi_bench.py mpm3d128 cpu 20 10 | grep RESULT
        ./target/release/examples/mpm3d --backend cpu --bench --n-grid 128 --steps 20 |
            grep -E "ms/substep"
    done
fi
