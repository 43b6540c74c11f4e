#!/usr/bin/env bash
# Installs the Debian packages the engine needs (idempotent): the Vulkan loader and Mesa's
# lavapipe (a Vulkan device on the CPU), the validation layer, shaderc / glslang /
# SPIRV-Tools, which mpm-vulkan links statically, Xvfb, a display for testing `--view`, and
# Open MPI with libclang (the `mpi` feature's bindings are generated against its headers).
set -euo pipefail
packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers libshaderc-dev glslang-dev spirv-tools xvfb
    openmpi-bin libopenmpi-dev libclang-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
