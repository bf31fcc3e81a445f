#!/usr/bin/env bash
# KernelBench's source for bench/kernelbench_peer.py: export a fetched snapshot's tree (its src/
# package and licence) into .peers/KernelBench (ignored by git; the GPU machine gets it by carry),
# with the snapshot's commit in .peers/KernelBench/COMMIT. MIRROR is the bare git dir that the
# search tool's `fetch github:ScalingIntelligence/KernelBench` returns.
#     bash bench/fetch_peer.sh /work/.mirror/ScalingIntelligence+KernelBench/repo
set -euo pipefail
mirror=${1:?usage: bash bench/fetch_peer.sh MIRROR_GIT_DIR}
cd "$(dirname "$0")/.."
rm -rf .peers/KernelBench
mkdir -p .peers/KernelBench
git --git-dir="$mirror" archive HEAD src LICENSE | tar -x -C .peers/KernelBench
git --git-dir="$mirror" rev-parse HEAD >.peers/KernelBench/COMMIT
echo "KernelBench $(cat .peers/KernelBench/COMMIT) in .peers/KernelBench ($(du -sh .peers/KernelBench | cut -f1))"
