#!/usr/bin/env bash
# bench/gpu_run.sh from a clean tree on the GPU machine: the committed HEAD, packed here with
#     git archive --format=tar.gz -o .out/clean.tgz HEAD
# and carried with the KernelBench copy (carry: [".out/clean.tgz", ".kb"]), so nothing uncommitted
# (a helper's half-done edit) ever travels. Same environment variables as gpu_run.sh; OUT must be
# an absolute path (the device's $OUT is).
#     OUT=$OUT/s7 STEPS="tests isolation" bash bench/gpu_clean_tree.sh
set -euo pipefail
tree=/tmp/kevin-clean
rm -rf "$tree"
mkdir -p "$tree"
tar xzf .out/clean.tgz -C "$tree"
if [ -d .kb ]; then cp -r .kb "$tree/.kb"; fi
cd "$tree"
exec bash bench/gpu_run.sh
