#!/usr/bin/env bash
# scripts/bundle end to end: the archive, a clean copy of the checkout, docs/setup.md's build from the bundle inside a
# network namespace with no network (unshare -n), the bundled libraries linked, a short training run on the bundled
# data, and scripts/gpu-check stopping, with exit 3 and a reason, where it needs a GPU.
# Usage: tests/scripts/bundle_test.sh SOURCE_DIR PYTHON   (PYTHON: one with torch; its LibTorch is built against)
set -euo pipefail
src=$(realpath "$1") python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

"$src/scripts/bundle" --data "$work/ddptrain-bundle.tar.gz"
# A clean copy: the files git tracks (and untracked ones it does not ignore), no build/, no .venv.
mkdir "$work/src" "$work/node"
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$work/src"
tar -xzf "$work/ddptrain-bundle.tar.gz" -C "$work/node"
bundle=$work/node/ddptrain-bundle

# docs/setup.md's commands ("Installing on nodes without network"), without the test suite, on every core (CTest runs
# this test alone). What the test proves (no network, the bundle's headers and libraries, a binary that trains) does
# not rest on the optimiser, so the Release build compiles at -O0: a unity batch of the core library then takes about
# 40% less time than at -O3 (its precompiled header made at -O0 too), and this build is the suite's largest cost.
unshare -n cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" -DDDP_BUNDLE="$bundle" -DDDP_VENV_PYTHON="$python" -DDDP_BUILD_TESTS=OFF |
  tee "$work/configure.log" | grep ddptrain:
grep -q "data.download (libcurl) OFF" "$work/configure.log" || fail "data.download is built from a bundle"
unshare -n cmake --build "$work/build" -j "$(nproc)" --target ddptrain ddprun | tail -n 1

# Compiled against the bundle's headers, linked to its libraries, LibTorch from the given Python's torch.
grep -q -- "-isystem $bundle/include" "$work/build/compile_commands.json" || fail "the bundle's include/ is not used"
ldd "$work/build/ddptrain" >"$work/ldd.txt"
for lib in libisal.so.2 libtomlplusplus.so.3 libjpeg.so.62 libpng16.so.16 libarchive.so.13 libcrypto.so.3 libz.so.1; do
  grep -q "$lib => $bundle/lib/" "$work/ldd.txt" || fail "$lib is not the bundle's: $(grep "$lib" "$work/ldd.txt")"
done
torch_lib=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib
grep -q "libtorch_cpu.so => $torch_lib/" "$work/ldd.txt" || fail "libtorch_cpu.so is not $torch_lib's"
! grep -q "not found" "$work/ldd.txt" || fail "unresolved libraries: $(grep 'not found' "$work/ldd.txt")"

unshare -n "$work/build/ddptrain" "$work/src/configs/quickstart.toml" --training.max_steps=3 \
  --data.dir="$bundle/share/datasets/fashion-mnist" --job.out_dir="$work/run" --metrics.progress=plain | tail -n 3
[ -s "$work/run/model.pt" ] || fail "the training run wrote no model.pt"

# gpu-check on this machine (no GPU): the build is there, so it goes straight to the GPU and stops.
set +e
GPU_CHECK_BUILD=$work/build DDP_BUNDLE=$bundle DDP_PYTHON=$python "$work/src/scripts/gpu-check" >"$work/gpu-check.log" 2>&1
rc=$?
set -e
cat "$work/gpu-check.log"
[ "$rc" -eq 3 ] || fail "gpu-check exited $rc, not 3 (no GPU)"
grep -q "need a GPU, so gpu-check stops here" "$work/gpu-check.log" || fail "gpu-check did not say it needs a GPU"
[ ! -e "$work/src/bench/GPU.md" ] || cmp -s "$work/src/bench/GPU.md" "$src/bench/GPU.md" || fail "gpu-check wrote bench/GPU.md"
echo "bundle build: OK"
