#!/usr/bin/env bash
# Runs one libFuzzer target with a seed it picks (DDP_FUZZ_SEED overrides) and prints one line when nothing was found;
# on a finding, the seed, the sanitizer's or libFuzzer's report and the failing input in base64, so that a CI log's
# tail holds what it takes to reproduce it. Usage: run_fuzzer.sh FUZZER ARTIFACT_PREFIX [libFuzzer flags and corpora]
set -uo pipefail
fuzzer=$1 artifacts=$2
shift 2
seed=${DDP_FUZZ_SEED:-$(((RANDOM << 15 | RANDOM) + 1))}
log=$(mktemp) started=$(mktemp)  # started: older than any input this run writes
trap 'rm -f "$log" "$started"' EXIT
"$fuzzer" -seed="$seed" -verbosity=0 -print_funcs=0 -artifact_prefix="$artifacts" "$@" >"$log" 2>&1
rc=$?
name=$(basename "$fuzzer")
if [ "$rc" -eq 0 ]; then
  echo "$name: -seed=$seed, $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -n 1), nothing found"
  exit 0
fi
echo "$name failed (exit $rc) with -seed=$seed; its report:"
grep -v -e '^#[0-9]' -e '^"' -e '^###### ' -e '^INFO: ' "$log" | tail -n 80
find "$(dirname "$artifacts")" -maxdepth 1 -type f -name "$(basename "$artifacts")*" -newer "$started" | while read -r f; do
  echo "the input that failed, $f ($(stat -c %s "$f") bytes), base64:"
  base64 -w 120 "$f"
done
exit "$rc"
