#!/usr/bin/env bash
# The checks that need a real GPU, in one go: build, list the Vulkan devices, run the
# CPU/GPU equivalence suites and the per-backend solver suite through the GPU's own driver
# (validation layer on), then time the standard scenes (`mpm bench`), Taichi's benchmark
# scenes and sparse against dense layouts on the GPU. Prints every figure; exits non-zero when
# a suite fails or when the only device is a software renderer.
#
#   bash scripts/gpu_check.sh            # about 10 minutes on a fast machine
#   bash scripts/gpu_check.sh --quick    # fewer timed substeps
#
# MPM_VK_DEVICE=N|name picks the device (see `mpm devices`); MPM_ALLOW_SOFTWARE=1 lets the
# script run on lavapipe / llvmpipe, to try it on a machine without a GPU.
# It needs what scripts/setup.sh installs but Mesa (the Vulkan loader, the validation layer,
# shaderc) and the GPU's own Vulkan driver; for NVIDIA in a container VK_DRIVER_FILES may have
# to name its ICD file (e.g. /usr/share/vulkan/icd.d/nvidia_icd.json).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=500
big=128
if [ "${1:-}" = --quick ]; then
    steps=50
    big=64
fi
export MPM_REQUIRE_GPU=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== build"
cargo build --release --bin mpm --example mpm99 --example mpm3d --example layout_ratios

echo "== devices"
devices=$(./target/release/mpm devices)
echo "$devices"
chosen=$(grep -- '<- auto' <<<"$devices" || true)
if [ -z "$chosen" ] || grep -qiE 'llvmpipe|lavapipe|swiftshader' <<<"$chosen"; then
    if [ "${MPM_ALLOW_SOFTWARE:-0}" != 1 ]; then
        echo "gpu_check: no hardware Vulkan device is picked (${chosen:-none}); set MPM_VK_DEVICE," \
            "or MPM_ALLOW_SOFTWARE=1 to run on the software renderer anyway" >&2
        exit 1
    fi
fi

echo "== CPU/GPU equivalence and per-backend suites"
suites=(--test equivalence --test solver_equivalence --test materials --test fields
    --test sparse --test blocks --test binning --test jfluid --test solver --test validation)
if ! cargo test --release "${suites[@]}" >"$log" 2>&1; then
    grep -E 'FAILED|panicked|failures:' "$log" | head -40
    tail -60 "$log"
    echo "gpu_check: a suite failed (full log above)" >&2
    exit 1
fi
grep -E '^test result|Running' "$log"

echo "== mpm bench ($steps substeps per scene and backend)"
./target/release/mpm bench --backends both --steps "$steps"

echo "== Taichi's scenes, dedicated kernels (ms per substep)"
for backend in cpu vulkan; do
    ./target/release/examples/mpm99 --backend "$backend" --bench --steps $((steps * 4)) |
        grep -E '^backend|ms/substep'
    ./target/release/examples/mpm3d --backend "$backend" --bench --steps "$steps" |
        grep -E 'ms/substep'
done
./target/release/examples/mpm3d --backend vulkan --bench --n-grid "$big" --steps "$steps" |
    grep -E 'ms/substep'

echo "== mpm3d schedules on the GPU: plain, sorted every 16 (the default), tiled P2G"
for schedule in "--sort-every 0" "--sort-every 16" "--sort-every 16 --tiled"; do
    echo "-- $schedule"
    # shellcheck disable=SC2086
    ./target/release/examples/mpm3d --backend vulkan --bench --steps "$steps" $schedule |
        grep -E 'loop p2g|ms/substep'
done

echo "== sparse against dense on the GPU"
for fill in 0.5 0.01; do
    ./target/release/examples/layout_ratios --backend vulkan --fill "$fill" --rounds 10
done
