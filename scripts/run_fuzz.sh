#!/bin/bash
# Runs every fuzz target of a WARDEN_FUZZ=ON build (libFuzzer, ASan, UBSan)
# for SECONDS each, from its seed corpus in tests/fuzz/corpus/<name> with
# its dictionary, and prints a table: runs, coverage, corpus growth,
# findings. New inputs go to FUZZ_BUILD_DIR/corpus/<name> (the seeds in the
# repository are left alone: add a finding there by hand, with its fix);
# crashes, leaks and timeouts to FUZZ_BUILD_DIR/findings/<name>/.
#
#   scripts/run_fuzz.sh FUZZ_BUILD_DIR [SECONDS] [TARGET...]
set -uo pipefail

build_dir=$(realpath "${1:?usage: run_fuzz.sh FUZZ_BUILD_DIR [SECONDS] [TARGET...]}")
seconds=${2:-600}
shift $(( $# < 2 ? $# : 2 ))
source_dir=$(realpath "$(dirname "$0")/..")
fuzz_dir="$source_dir/tests/fuzz"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$fuzz_dir"/*_fuzz.cc; do t=${f##*/}; targets+=("${t%_fuzz.cc}"); done
fi

failed=0
rows=()
for name in "${targets[@]}"; do
  binary="$build_dir/bin/fuzz_$name"
  [ -x "$binary" ] || { echo "no $binary: build with WARDEN_FUZZ=ON (make fuzz)" >&2; exit 1; }
  corpus="$build_dir/corpus/$name"
  findings="$build_dir/findings/$name"
  mkdir -p "$corpus" "$findings"
  dict=()
  [ -f "$fuzz_dir/$name.dict" ] && dict=(-dict="$fuzz_dir/$name.dict")
  log="$build_dir/findings/$name.log"
  echo "fuzzing $name for ${seconds}s (log: $log)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$binary" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$fuzz_dir/corpus/$name" >"$log" 2>&1
  status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  size=$(ls "$corpus" | wc -l)
  found=$(ls "$findings" | wc -l)
  verdict=clean
  if [ "$status" -ne 0 ] || [ "$found" -ne 0 ]; then verdict="FINDING (exit $status): $(ls "$findings" | head -3 | tr '\n' ' ')"; failed=1; fi
  rows+=("$(printf '| %-15s | %10s | %6s | %6s | %7s | %s |' "$name" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$size" "$verdict")")
done

echo
echo "| target          |       runs |    cov |     ft |  corpus | result |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
