#!/usr/bin/env bash
# Installs the Debian packages the engine needs (idempotent): the Vulkan loader and Mesa's
# lavapipe (a Vulkan device on the CPU), the validation layer, shaderc / glslang /
# SPIRV-Tools, which mpm-vulkan links statically, and Xvfb, a display for testing `--view`.
set -euo pipefail
packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers libshaderc-dev glslang-dev spirv-tools xvfb)
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
