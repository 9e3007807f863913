#!/bin/bash
# Runs ctest in a sanitizer build (WARDEN_SANITIZE) with the runtime options
# below, then prints every sanitizer report and fails if there is one, even
# when the test around the program passed (a daemon that died of a finding
# under a test that tolerated it). docs/security.md "Sanitizers".
#
#   scripts/run_sanitized_tests.sh asan|tsan BUILD_DIR [CTEST_ARGS...]
#
# Reports go to BUILD_DIR/sanitizer-logs/<kind>.<pid> (log_path), not to the
# programs' stderr: tests start wardend, the keeper and the CLI as
# subprocesses and not all of them keep their stderr. Sandboxes get their own
# environment, not this one: the only instrumented code inside them is
# warden-python-zygote's clones, which compile their options in
# (kernel/python_zygote.cc) and report on the sandbox's stderr.
set -uo pipefail

kind=${1:?usage: run_sanitized_tests.sh asan|tsan BUILD_DIR [CTEST_ARGS...]}
build_dir=$(realpath "${2:?usage: run_sanitized_tests.sh asan|tsan BUILD_DIR [CTEST_ARGS...]}")
shift 2
source_dir=$(realpath "$(dirname "$0")/..")
supp="$source_dir/tests/sanitizers"
logs="$build_dir/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"

case "$kind" in
  asan)
    # halt_on_error: the first finding ends the program (the build has no
    # recovery either). Leaks are checked at every instrumented program's
    # exit; lsan.supp holds only leaks inside third-party libraries.
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:log_path=$logs/asan"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
    ;;
  tsan)
    # Debian's gRPC, upb, protobuf and Abseil are uninstrumented: they hand
    # data between their threads through atomics TSan cannot see, and only
    # the memcpy/memcmp they call is intercepted (seen so far in libgrpc,
    # libupb, libabsl_status, libabsl_cord, libabsl_time_zone and
    # libabsl_graphcycles_internal). ignore_noninstrumented_modules stops
    # checking interceptors called from them; every access our code makes is
    # still checked. tsan.supp holds races inside those libraries' own
    # header code, each with the reason it is not ours. gRPC's header code
    # also races with itself across libgrpc's hand-offs (a completion queue
    # tag, its executor): scripts/tsan_reports.py recognises those reports
    # (both accesses gRPC's, on memory gRPC allocated or on a reactor from
    # its gRPC constructor to gRPC's callback) and fails on any
    # other. So a report does not end its program (halt_on_error=0,
    # exitcode=0): the script below judges every report instead.
    export TSAN_OPTIONS="halt_on_error=0:exitcode=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$supp/tsan.supp:print_suppressions=0:log_path=$logs/tsan"
    ;;
  *)
    echo "run_sanitized_tests.sh: the kind is asan or tsan, not '$kind'" >&2
    exit 2
    ;;
esac

start=$(date +%s)
(cd "$build_dir" && ctest --output-on-failure "$@")
status=$?
echo "ctest: exit $status after $(( $(date +%s) - start )) s (load average: $(cut -d' ' -f1-3 /proc/loadavg))"

reports=$(find "$logs" -type f | sort)
if [ "$kind" = tsan ] && [ -n "$reports" ]; then
  # shellcheck disable=SC2086
  if python3 "$source_dir/scripts/tsan_reports.py" $reports; then
    echo "run_sanitized_tests.sh: $(echo "$reports" | wc -l) log(s) in $logs, every report gRPC's own hand-off"
    reports=""
  else
    echo "run_sanitized_tests.sh: ThreadSanitizer reports of ours in $logs (above)" >&2
    exit 1
  fi
fi
if [ -n "$reports" ]; then
  for r in $reports; do
    echo "==== sanitizer report $r"
    cat "$r"
  done
  echo "run_sanitized_tests.sh: $(echo "$reports" | wc -l) sanitizer report(s) in $logs" >&2
  exit 1
fi
echo "no sanitizer reports in $logs"
exit $status
