#!/usr/bin/env bash
# One GPU lease, prepared ahead (docs/gpu.md): install what the machine's image lacks from carried wheels, run the
# CUDA tests, the gpu preset and its report, each in a time box, so that the whole is one command of the device
# tool (10 minutes at most), then bring back what the report is made of, within the tool's limits on files.
#
#   bash bench/gpu_lease.sh OUT [SECONDS]
#
# SECONDS (default 575) bounds the whole script; the report keeps REPORT_SECONDS (default 100) of it and the study
# gets what the setup and the tests leave (about 370 s; the gpu preset is sized to about 325, bench/gpu_cost.py). Run it again on the same machine (warm: within 30 s of the last call)
# and it resumes: the tests are not run again, the study skips what it stored, the report is written again.
#
# It prints one "phase NAME SECONDS" line per phase (setup, tests, study, report, pack), and leaves in OUT, flat:
#   results.sqlite.gz  the study's database (every run's config, metrics and learning curve; gzip of SQLite)
#   claims.json        every verdict and the comparisons behind it
#   report.md          the report (its figures and report.html, claims.md, protocol.json in report.tar.gz)
#   report.tar.gz      figures/*.png and the report's other pages
#   timings.json       each phase's seconds and exit status, the stored runs by status, the study's own seconds
#   device.txt         the GPU, its memory and driver; torch, CUDA, the CPU, Python, pelab's source digest
#   lease.log          everything every phase printed
# Never a checkpoint: the study runs with --no-checkpoints (the gpu preset's claims need none; docs/gpu.md).
# At the end the script checks OUT against the device's limits (at most 8 files, 16 MiB each, 64 MiB in all, plain
# names, at most 2 folders down) and says so.
#
# Environment (tests/test_gpu_session.py runs this same script on a CPU, at toy size):
#   LEASE_STUDY    a study file instead of the gpu preset    LEASE_FOLDER   the study folder (pelab-out/gpu)
#   LEASE_DEVICE   cuda (default) or cpu                     LEASE_TESTS    pytest's arguments (tests/test_cuda.py);
#   LEASE_RUNS_PER_GPU  runs sharing the GPU (4: whole stacks)                 empty: no tests
#   LEASE_WHEELS   the carried wheels' folder (.whl)          LEASE_SITE     where they go (/tmp/site)
#   TEST_SECONDS (75), REPORT_SECONDS (100), PACK_SECONDS (15): the time boxes; PYTHON (python3); LEASE_COMMIT
# Exit status: 0 when the study finished and its report was written; 3 when the study's time box stopped it (run
# the script again to resume); 2 when OUT breaks the device's limits; 1 when a phase failed (see lease.log).
set -u
OUT=${1:?usage: bash bench/gpu_lease.sh OUT [SECONDS]}
export LEASE_BUDGET=${2:-575}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
START=$(date +%s)
PY=${PYTHON:-python3}
FOLDER=${LEASE_FOLDER:-pelab-out/gpu}
export LEASE_DEVICE=${LEASE_DEVICE:-cuda}
export LEASE_RUNS_PER_GPU=${LEASE_RUNS_PER_GPU:-4}
TESTS=${LEASE_TESTS-tests/test_cuda.py}
LEASE_SITE=${LEASE_SITE:-/tmp/site}
TEST_SECONDS=${TEST_SECONDS:-75}
REPORT_SECONDS=${REPORT_SECONDS:-100}
PACK_SECONDS=${PACK_SECONDS:-15}
LOG=$OUT/lease.log
WORK=$(mktemp -d)
PHASES=$WORK/phases.tsv
FILES="$ROOT/bench/gpu_lease_files.py"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
trap 'rm -rf "$WORK"' EXIT

say() { echo "$*" | tee -a "$LOG"; }
left() { echo $((LEASE_BUDGET - ($(date +%s) - START))); }
begin() { P_NAME=$1; P_START=$(date +%s); echo "--- $1 ($(date -u +%H:%M:%S) UTC)" >> "$LOG"; }
end() {  # end PHASE's clock: its "phase NAME SECONDS" line, and a row for timings.json
  local s=$(($(date +%s) - P_START))
  say "phase $P_NAME $s"
  printf '%s\t%s\t%s\n' "$P_NAME" "$s" "$1" >> "$PHASES"
}
STATUS=0

begin setup
SITE=""
WHEELS=${LEASE_WHEELS:-.whl}
if compgen -G "$WHEELS/*.whl" > /dev/null; then  # what the image lacks, carried (bench/gpu_wheels.sh made them)
  if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$LEASE_SITE" \
      "$WHEELS"/*.whl >> "$LOG" 2>&1; then
    SITE=$LEASE_SITE
    say "setup: $(compgen -G "$WHEELS/*.whl" | wc -l) carried wheel(s) installed into $SITE"
  else
    say "setup: the carried wheels did not install (lease.log); going on with the image's packages"
  fi
else
  say "setup: no wheels in $WHEELS/; using the packages this Python has"
fi
export PYTHONPATH="$ROOT${SITE:+:$SITE}${PYTHONPATH:+:$PYTHONPATH}"  # pelab from this working tree
"$PY" "$FILES" env "$OUT/device.txt" >> "$LOG" 2>&1
cat "$OUT/device.txt"
end 0

if [ ! -e "$FOLDER/results.sqlite" ] && [ -n "$TESTS" ]; then  # the first call of a lease only
  begin tests
  # shellcheck disable=SC2086  # pytest's arguments, word-split on purpose
  timeout -s INT -k 10 "$TEST_SECONDS" "$PY" -m pytest $TESTS -p no:cacheprovider -x --durations=5 >> "$LOG" 2>&1
  rc=$?
  summary=$(grep -E "(passed|failed|error|skipped|no tests ran)" "$LOG" | tail -1)
  [ "$rc" = 124 ] && summary="stopped by its ${TEST_SECONDS} s time box; last: $summary"
  say "tests: rc=$rc ${summary}"
  end "$rc"
fi

begin study
args=(-m pelab study)
if [ -n "${LEASE_STUDY:-}" ]; then args+=("$LEASE_STUDY"); else args+=(--preset gpu); fi
args+=(--out "$FOLDER" --device "$LEASE_DEVICE" --no-report --no-checkpoints)
case $LEASE_DEVICE in cuda*) args+=(--runs-per-gpu "$LEASE_RUNS_PER_GPU") ;; esac
if grep -q "allow_long" pelab/cli/study.py; then args+=(--allow-long); fi  # the CPU-fitted estimate bound
box=$(($(left) - REPORT_SECONDS - PACK_SECONDS))
rc=1
if [ "$box" -gt 10 ]; then
  say "study: pelab ${args[*]:2} (time box ${box} s)"
  timeout -s INT -k 15 "$box" "$PY" "${args[@]}" >> "$LOG" 2>&1
  rc=$?
  grep -E "^(study |expected|[0-9]+ run\(s\) in|pelab: )" "$LOG" | tail -4
  case $rc in
    0) say "study: finished" ;;
    124) say "study: stopped by its ${box} s time box; run this script again to resume"; STATUS=3 ;;
    *) say "study: rc=$rc (lease.log)"; STATUS=1 ;;
  esac
else
  say "study: no time left for it (${box} s)"; STATUS=3
fi
"$PY" "$FILES" stored "$FOLDER" | tee -a "$LOG"
end "$rc"

begin report
rbox=$(($(left) - PACK_SECONDS))
done_runs=$("$PY" "$FILES" done "$FOLDER" 2>> "$LOG" || echo 0)
rc=1
if [ "$done_runs" -gt 0 ] && [ "$rbox" -gt 10 ]; then
  timeout -s INT -k 10 "$rbox" "$PY" -m pelab report "$FOLDER" >> "$LOG" 2>&1
  rc=$?
  grep -E "^report: done" "$LOG" | tail -1
  [ "$rc" = 0 ] || { say "report: rc=$rc (lease.log)"; [ "$STATUS" = 0 ] && STATUS=1; }
else
  say "report: not written (${done_runs} runs done, ${rbox} s left)"; [ "$STATUS" = 0 ] && STATUS=1
fi
end "$rc"

begin pack
"$PY" "$FILES" pack "$FOLDER" "$OUT" "$PHASES" | tee -a "$LOG"
end $?
say "total $(($(date +%s) - START)) s of a ${LEASE_BUDGET} s budget"
"$PY" "$FILES" check "$OUT" | tee -a "$LOG"
[ "${PIPESTATUS[0]}" = 0 ] || STATUS=2
exit "$STATUS"
