#!/usr/bin/env bash
# The benchmark comparison of docs/performance.md, on a machine with a GPU, its outputs written into OUT_DIR:
#
#   bash scripts/gpu-bench.sh OUT_DIR [--device N] [--quick] [--tinygrad]
#
# 1. `vkbackend info --json`: the devices (info.json).
# 2. `vkbackend bench`: our cases beside the raw-Vulkan C reference (vkbackend/bench/vulkan_ref.c) and, where they
#    are importable, wgpu-py and PyTorch CUDA, in one run: bench.json (the records), bench.png (the chart), bench.txt
#    (the table), bench.log (progress, and why a peer was skipped).
# 3. With --tinygrad, `vkbackend bench --tinygrad` (on VK device 0): tinygrad.json, .png, .txt, .log.
#
# It assumes what the README's Install section says: a Vulkan loader and the GPU's Vulkan driver, and this package
# installed with the bench extra (`pip install '.[bench]'` in this checkout; '.[bench,tinygrad]' for --tinygrad).
# The C reference also needs a C compiler ($CC, else cc) and the Vulkan headers (libvulkan-dev); without them it is
# skipped and bench.log says so. $PYTHON picks the interpreter (default python3). The exit status is non-zero when
# a bench was (one of our cases failed its check, or a tinygrad checksum disagreed).
set -euo pipefail
usage="usage: bash scripts/gpu-bench.sh OUT_DIR [--device N] [--quick] [--tinygrad]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
out=$1; shift
python=${PYTHON:-python3}
bench=(); tinygrad=0
while [ $# -gt 0 ]; do
  case $1 in
    --device) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; bench+=(--device "$2"); shift 2 ;;
    --quick) bench+=(--quick); shift ;;
    --tinygrad) tinygrad=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
"$python" -c "import vkbackend" || { echo "vkbackend is not importable by $python: install it first" \
  "(README, Install: pip install '.[bench]')" >&2; exit 2; }
mkdir -p "$out"

plots=1
"$python" -c "import matplotlib" 2>/dev/null || { plots=0
  echo "gpu-bench.sh: matplotlib is not installed (pip install '.[bench]'): no plots" >&2; }

# run NAME ARGS...: `vkbackend ARGS --json NAME.json --plot NAME.png`; the table goes into NAME.txt, the progress
# into NAME.log, both to the screen too.
status=0
run() {
  local name=$1; shift
  local args=("$@" --json "$out/$name.json")
  [ "$plots" = 0 ] || args+=(--plot "$out/$name.png")
  echo "gpu-bench.sh: $python -m vkbackend ${args[*]}" >&2
  "$python" -m vkbackend "${args[@]}" 2>&1 >"$out/$name.txt" | tee "$out/$name.log" >&2 || status=1
  cat "$out/$name.txt"
}

"$python" -m vkbackend info --json > "$out/info.json"
run bench bench "${bench[@]}"
if [ "$tinygrad" = 1 ]; then
  quick=(); [[ " ${bench[*]} " == *" --quick "* ]] && quick=(--quick)
  run tinygrad bench --tinygrad "${quick[@]}"
fi
echo "gpu-bench.sh: wrote $out (exit status $status)" >&2
exit $status
