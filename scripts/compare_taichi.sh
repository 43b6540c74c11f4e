#!/usr/bin/env bash
# Times Taichi 1.7.4's own mpm99 and mpm3d (64^3) next to this engine's, on the CPU and on
# Vulkan, three alternating runs each. Taichi goes into a virtual environment under target/.
# Not part of the tests: run it on a quiet machine, e.g. `bash scripts/compare_taichi.sh`;
# `--big` adds mpm3d at 128^3 on the CPU (524,288 particles, two alternating runs of 20
# substeps after 10 of warm-up; several minutes).
#
# Both engines warm up past the scenes' landing before timing (mpm99: 2,000 substeps, 0.2 s;
# mpm3d: 800 substeps, 0.16 s; the cube lands after about 0.14 s). While a block falls, its
# particles' momentum has exactly zero x (and z) components, and this engine's GPU scatter
# skips a float atomic that adds zero (Taichi's does not): timed from the start, mpm3d's P2G
# on lavapipe took 21 ms a substep in free fall against 37-39 ms after the landing. The
# CPU's private-copy scatter adds every word, so `--big` times the falling phase.
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
        "$venv/bin/python" scripts/taichi_bench.py mpm99 "$arch" 2000 2000 | grep RESULT
        ./target/release/examples/mpm99 --backend "$arch" --bench --warmup 2000 --steps 2000 |
            grep -E "ms/substep"
        "$venv/bin/python" scripts/taichi_bench.py mpm3d "$arch" 100 800 | grep RESULT
        ./target/release/examples/mpm3d --backend "$arch" --bench --warmup 800 --steps 100 |
            grep -E "ms/substep"
    done
done
if [ "${1:-}" = --big ]; then
    for run in 1 2; do
        "$venv/bin/python" scripts/taichi_bench.py mpm3d128 cpu 20 10 | grep RESULT
        ./target/release/examples/mpm3d --backend cpu --bench --n-grid 128 --steps 20 |
            grep -E "ms/substep"
    done
fi
