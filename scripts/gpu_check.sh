#!/usr/bin/env bash
# The checks that need a real GPU, in one go: list the Vulkan devices, run the CPU/GPU
# equivalence suites and the per-backend solver suite through the GPU's own driver
# (validation layer on), then time the standard scenes (`mpm bench`), Taichi's benchmark
# scenes, the P2G schedules, subgroup-aggregated float adds and sparse against dense layouts
# on the GPU, each after a warm-up past the scenes' landing. Prints every figure;
# a failing suite is reported and the timings still run; exits non-zero when a suite failed
# or when the only device is a software renderer.
#
#   bash scripts/gpu_check.sh                 # build here, then check (about 10 minutes)
#   bash scripts/gpu_check.sh --quick         # fewer timed substeps
#   bash scripts/gpu_check.sh --timings-only  # no suites, only the figures
#   bash scripts/gpu_check.sh --bundle F      # build here and pack the binaries into F
#   bash scripts/gpu_check.sh --from F        # check with the binaries packed in F
#
# `--bundle` / `--from` serve a GPU machine without a Rust toolchain: the binaries (the
# program, the examples and the suites' test executables, stripped; shaderc is linked in)
# are built where cargo is and run there from the repository's root. With Taichi importable
# (`python3 -c 'import taichi'`, or its folder in PYTHONPATH) the script also times Taichi's
# own mpm99 / mpm3d on CUDA and Vulkan next to ours (scripts/taichi_bench.py).
#
# MPM_VK_DEVICE=N|name picks the device (see `mpm devices`); MPM_ALLOW_SOFTWARE=1 lets the
# script run on lavapipe / llvmpipe, to try it on a machine without a GPU.
# It needs the Vulkan loader, the validation layer and the GPU's own Vulkan driver (building
# also needs what scripts/setup.sh installs); for NVIDIA in a container VK_DRIVER_FILES may
# have to name its ICD file (e.g. /usr/share/vulkan/icd.d/nvidia_icd.json).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=500
# Substeps before timing: the scenes fall at first, and until they land some momentum
# components are exactly zero, whose atomics the GPU scatter skips (see compare_taichi.sh).
warm=1000
big=128
huge=256
mode=build
suites_too=1
archive=
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) steps=50 warm=200 big=64 huge= ;;
    --timings-only) suites_too=0 ;;
    --bundle | --from)
        mode=${1#--}
        archive=${2:?"$1 needs a file name"}
        shift
        ;;
    *)
        echo "gpu_check: unknown argument $1 (--quick, --timings-only, --bundle FILE," \
            "--from FILE)" >&2
        exit 2
        ;;
    esac
    shift
done

suites=(equivalence solver_equivalence materials fields sparse blocks binning jfluid solver
    validation)
examples=(mpm99 mpm3d layout_ratios)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

# Builds the program, the examples and the suites, and puts them into $bin under plain names.
build() {
    local out=${CARGO_TARGET_DIR:-target}/release
    cargo build --release --bin mpm "${examples[@]/#/--example=}"
    cp "$out/mpm" "$bin/"
    for e in "${examples[@]}"; do cp "$out/examples/$e" "$bin/"; done
    # `--no-run` names each test executable on a line "Executable tests/NAME.rs (PATH)".
    cargo test --release --no-run "${suites[@]/#/--test=}" 2>&1 |
        sed -n 's/.*Executable tests\/\([a-z_0-9]*\)\.rs (\(.*\))$/\1 \2/p' |
        while read -r name path; do cp "$path" "$bin/test-$name"; done
    for s in "${suites[@]}"; do
        [ -x "$bin/test-$s" ] || { echo "gpu_check: no test executable for $s" >&2; exit 1; }
    done
    # The suites check every compiled shader with spirv-val (SPIRV-Tools) when a GPU is required.
    if command -v spirv-val >/dev/null; then cp "$(command -v spirv-val)" "$bin/"; fi
}

case $mode in
bundle)
    # The binaries run on another machine: on x86-64 they are built for x86-64-v3 (AVX2 and
    # FMA, which every CPU that hosts a current GPU has) instead of this machine's own
    # instruction set (.cargo/config.toml), in a target folder of their own.
    if [ "$(uname -m)" = x86_64 ]; then
        export RUSTFLAGS="-C target-cpu=x86-64-v3" CARGO_TARGET_DIR=target/bundle
    fi
    echo "== build"
    build
    strip "$bin"/*
    tar -C "$bin" -cf - . | xz -9 -T0 >"$archive"
    echo "gpu_check: wrote $archive ($(du -h "$archive" | cut -f1)); on the GPU machine, from" \
        "this repository's root: bash scripts/gpu_check.sh --from $archive"
    exit 0
    ;;
from)
    tar -C "$bin" -xf "$archive"
    export PATH="$bin:$PATH"
    ;;
build)
    echo "== build"
    build
    ;;
esac

export MPM_REQUIRE_GPU=1
failed=0
log=$(mktemp)
trap 'rm -rf "$bin" "$log"' EXIT

echo "== devices"
devices=$("$bin/mpm" devices)
echo "$devices"
chosen=$(grep -- '<- auto' <<<"$devices" || true)
if [ -z "$chosen" ] || grep -qiE 'llvmpipe|lavapipe|swiftshader' <<<"$chosen"; then
    if [ "${MPM_ALLOW_SOFTWARE:-0}" != 1 ]; then
        echo "gpu_check: no hardware Vulkan device is picked (${chosen:-none}); set MPM_VK_DEVICE," \
            "or MPM_ALLOW_SOFTWARE=1 to run on the software renderer anyway" >&2
        exit 1
    fi
fi

if [ "$suites_too" = 1 ]; then
    echo "== CPU/GPU equivalence and per-backend suites"
    # The device and whether the validation layer loaded (the harness captures this line).
    "$bin/test-equivalence" --nocapture --exact funcs_calling_funcs 2>&1 |
        grep -m1 '^equivalence:' || true
else
    suites=()
fi
for s in "${suites[@]}"; do
    start=$SECONDS
    if "$bin/test-$s" >"$log" 2>&1; then
        echo "$s: $(grep '^test result' "$log") [$((SECONDS - start)) s]"
    else
        failed=1
        echo "$s: FAILED [$((SECONDS - start)) s]"
        # Each failing test's own output (its panic message and the failing input).
        sed -n '/^---- /,/^failures:$/p' "$log" | head -120
        grep '^test result' "$log"
    fi
done

echo "== mpm bench ($steps substeps per scene and backend after $warm of warm-up)"
"$bin/mpm" bench --backends both --steps "$steps" --warmup "$warm"

echo "== Taichi's scenes, dedicated kernels (ms per substep)"
for backend in cpu vulkan; do
    "$bin/mpm99" --backend "$backend" --bench --warmup $((warm * 2)) --steps $((steps * 4)) |
        grep -E '^backend|ms/substep'
    "$bin/mpm3d" --backend "$backend" --bench --warmup "$warm" --steps "$steps" |
        grep -E 'ms/substep'
done
for n in $big $huge; do
    echo "-- mpm3d $n^3, Vulkan"
    "$bin/mpm3d" --backend vulkan --bench --n-grid "$n" --warmup $((warm * 2)) --steps "$steps" |
        grep -E 'ms/substep'
done

echo "== batches of launches (the default) against a submission and a wait per launch"
for off in 0 1; do
    echo "-- MPM_VK_NO_BATCHES=$off"
    MPM_VK_NO_BATCHES=$off "$bin/mpm99" --backend vulkan --bench --warmup $((warm * 2)) \
        --steps $((steps * 4)) | grep -E 'ms/substep'
    MPM_VK_NO_BATCHES=$off "$bin/mpm" bench --backends vulkan --steps "$steps" \
        --warmup "$warm"
done

echo "== float += aggregated in subgroups (MPM_VK_AGGREGATE=1) against an atomic per invocation"
for aggregate in 0 1; do
    echo "-- MPM_VK_AGGREGATE=$aggregate"
    MPM_VK_AGGREGATE=$aggregate "$bin/mpm3d" --backend vulkan --bench --warmup "$warm" \
        --steps "$steps" | grep -E 'loop p2g:|ms/substep'
    MPM_VK_AGGREGATE=$aggregate "$bin/mpm" bench --backends vulkan --steps "$steps" \
        --warmup "$warm" | grep -E 'solver'
done

echo "== mpm3d schedules on the GPU: plain, sorted every 16 (the default), tiled P2G"
for schedule in "--sort-every 0" "--sort-every 16" "--sort-every 16 --tiled"; do
    echo "-- $schedule"
    # shellcheck disable=SC2086
    "$bin/mpm3d" --backend vulkan --bench --steps "$steps" $schedule | grep -E 'loop p2g|ms/substep'
done

echo "== sparse against dense on the GPU"
for fill in 0.5 0.01; do
    "$bin/layout_ratios" --backend vulkan --fill "$fill" --rounds 10
done

if python3 -c 'import taichi' >/dev/null 2>&1; then
    echo "== Taichi 1.7.4's own scenes on this machine (ms per substep)"
    for arch in cuda vulkan; do
        python3 scripts/taichi_bench.py mpm99 "$arch" $((steps * 4)) $((warm * 2)) | grep RESULT ||
            failed=1
        python3 scripts/taichi_bench.py mpm3d "$arch" "$steps" "$warm" | grep RESULT || failed=1
        python3 scripts/taichi_bench.py mpm3d128 "$arch" "$steps" $((warm * 2)) | grep RESULT ||
            failed=1
    done
fi

if [ "$failed" != 0 ]; then
    echo "gpu_check: a suite or a Taichi run failed (see above)" >&2
    exit 1
fi
