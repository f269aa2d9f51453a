#!/usr/bin/env bash
# The test suite on a machine with a GPU, from this checkout, under the Khronos validation layer (tests/conftest.py
# turns it and synchronization validation on); a summary goes to $OUT/summary.txt (default gpu-test-results/):
#
#   bash scripts/gpu-test.sh [TINYGRAD_CHECKOUT]
#
# 1. `pytest -m "not packaging" tests`, with `-n $JOBS` (default 8) where pytest-xdist is installed.
# 2. Given a clone of tinygrad's repository: its `test/backend` with DEV=VK and our skip plugin, run from a copy of
#    its tests at $TINYGRAD_COMMIT (default a9069c177a, the v0.14.0 release; docs/tinygrad.md says why a copy).
#    Those tests need tinygrad's CPU device, which compiles C with $CC (default clang) for a bare target; gcc cannot,
#    so the script checks that compiler (tests/conftest.py's check) and the checkout before running anything.
#
# A validation layer of one's own (a newer SDK's) is used by setting VK_ADD_LAYER_PATH to its directory of layer
# manifests. $PYTHON picks the interpreter (default python3). The exit status is non-zero when a run failed.
set -euo pipefail
usage="usage: [JOBS=8] [OUT=DIR] [VK_ADD_LAYER_PATH=DIR] bash scripts/gpu-test.sh [TINYGRAD_CHECKOUT]"
[ $# -le 1 ] || { echo "$usage" >&2; exit 2; }
case ${1:-} in -h|--help) echo "$usage"; exit 0 ;; esac
python=${PYTHON:-python3}
unset CDPATH  # so that $(cd DIR && pwd) prints DIR alone
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 1 ]; then
  problem=$(PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -c 'import sys; sys.path.insert(0, sys.argv[1])
from conftest import tinygrad_cpu_compiler_problem as p; print(p() or "")' "$root/tests")
  [ -z "$problem" ] || { echo "gpu-test.sh: $problem" >&2; exit 2; }
  git -C "$1" rev-parse --verify -q "${TINYGRAD_COMMIT:-a9069c177a}^{commit}" >/dev/null 2>&1 || {
    echo "gpu-test.sh: $1 is not a clone of tinygrad's repository with commit ${TINYGRAD_COMMIT:-a9069c177a}" >&2
    exit 2
  }
  tinygrad_checkout=$(cd "$1" && pwd)
fi
out=$(mkdir -p "${OUT:-$root/gpu-test-results}" && cd "${OUT:-$root/gpu-test-results}" && pwd)
cd "$root"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
jobs=()
if "$python" -c "import xdist" 2>/dev/null; then jobs=(-n "${JOBS:-8}"); fi

counts() {  # pass/fail/skip counts of a JUnit XML report
  "$python" - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
s = root if root.tag == "testsuite" else root.find("testsuite")
total, failed, errors, skipped = (int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
print(f"{total - failed - errors - skipped} passed, {failed} failed, {errors} errors, {skipped} skipped")
EOF
}

status=0
"$python" -m pytest "${jobs[@]}" -q -p no:cacheprovider -m "not packaging" --junitxml="$out/suite.xml" tests \
  2>&1 | tee "$out/suite.log" || status=1

tinygrad="not run"
if [ $# -eq 1 ]; then
  copy=$(mktemp -d)
  git -C "$tinygrad_checkout" archive "${TINYGRAD_COMMIT:-a9069c177a}" test extra examples conftest.py pyproject.toml | tar -x -C "$copy"
  (cd "$copy" && DEV=VK "$python" -m pytest "${jobs[@]}" -q -p vkbackend.tinygrad.testing_skips -p no:cacheprovider \
    --junitxml="$out/tinygrad.xml" test/backend) 2>&1 | tee "$out/tinygrad.log" || status=1
  rm -rf "$copy"
  tinygrad=$(counts "$out/tinygrad.xml")
fi

{
  "$python" -m vkbackend info --json | "$python" -c 'import json, sys
d = json.load(sys.stdin)[0]
print("device:", d["name"], " driver:", d["driver_name"], d["driver_info"], " Vulkan", d["api_version"])'
  "$python" -c 'import sys; sys.path.insert(0, "tests"); from conftest import validation_layer_version as v
print("validation layer:", ".".join(map(str, v())) if v() else "none")'
  echo "suite: $(counts "$out/suite.xml")"
  echo "tinygrad test/backend: $tinygrad"
} | tee "$out/summary.txt"
exit $status
