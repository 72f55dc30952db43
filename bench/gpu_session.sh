#!/usr/bin/env bash
# One GPU session, prepared ahead: the CUDA tests, then the paper preset on the GPU, then its report, each
# with a time box so the whole fits one lease. Resumable: run it again on the same machine and the study goes on
# where it stopped (pelab studies resume), then the report is written.
#
#   bash bench/gpu_session.sh OUT [SECONDS]
#
# OUT receives the logs, the nvidia-smi readout, paper-data.tar.gz (results.sqlite and the analyses) and, when
# the report is written, paper-report.tar.gz (the report, its figures and claims.json; never the checkpoints). SECONDS (default 540) bounds the
# whole script. Prints one "phase ... s" line per phase, so the time each took is in the log.
set -u
OUT=${1:?usage: bench/gpu_session.sh OUT [SECONDS]}
BUDGET=${2:-540}
START=$(date +%s)
PY=${PYTHON:-python3}
STUDY=${STUDY:-pelab-out/paper}
mkdir -p "$OUT"
left() { echo $((BUDGET - ($(date +%s) - START))); }
phase() { echo "phase $1 $(( $(date +%s) - START )) s"; }
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
lscpu | grep 'Model name' >> "$OUT/gpu.txt"
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available())" >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
phase setup

if [ ! -e "$STUDY/results.sqlite" ]; then  # the first call of a session only
  timeout -s INT ${TEST_SECONDS:-150} $PY -m pytest tests/test_cuda.py -q -p no:cacheprovider -x --durations=5 > "$OUT/cuda-tests.log" 2>&1
  echo "cuda tests: rc=$?"; tail -3 "$OUT/cuda-tests.log"
  phase tests
fi

STUDY_RC=1
STUDY_LEFT=$(( $(left) - ${REPORT_SECONDS:-150} ))
if [ "$STUDY_LEFT" -gt 30 ]; then
  timeout -s INT "$STUDY_LEFT" $PY -m pelab study ${STUDY_ARGS:---preset paper --device cuda} --out "$STUDY" --no-report \
    >> "$OUT/paper-study.log" 2>&1
  STUDY_RC=$?
  echo "paper study: rc=$STUDY_RC"; grep -v "^  " "$OUT/paper-study.log" | tail -4
  phase study
fi
$PY - "$STUDY" <<'PYEOF' || true
import sqlite3, sys
rows = sqlite3.connect(f"{sys.argv[1]}/results.sqlite").execute("select status, count(*) from runs group by status")
print("stored runs:", dict(rows.fetchall()))
PYEOF

if [ "$STUDY_RC" = 0 ] || [ "${FORCE_REPORT:-0}" = 1 ]; then
  timeout -s INT $(( $(left) - 15 )) $PY -m pelab report "$STUDY" > "$OUT/paper-report.log" 2>&1
  echo "paper report: rc=$?"; tail -25 "$OUT/paper-report.log"
  phase report
fi
D=$(dirname "$STUDY"); B=$(basename "$STUDY")
tar -czf "$OUT/paper-report.tar.gz" -C "$D" "$B/report.html" "$B/report.md" "$B/claims.json" "$B/claims.md" \
  "$B/figures" 2>/dev/null
tar -czf "$OUT/paper-data.tar.gz" --exclude="$B/analyses/pretrained" -C "$D" "$B/results.sqlite" "$B/analyses" \
  2>/dev/null
ls -la "$OUT"
phase end
