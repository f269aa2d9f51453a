"""Which vkbackend devices tinygrad's VK devices open, on a machine with two Vulkan devices (tests/tinygrad/
test_tensors.py sets VK_DRIVER_FILES to lavapipe's manifest and a copy): the open devices' indices after VK:0, after
VK:1 and after VK:2, the device each runs on, and a copy from VK:0 to VK:1 and back."""

import numpy as np
from isolated import report
from tinygrad import Device, Tensor

import vkbackend.tinygrad  # noqa: F401 - the tinygrad.runtime.ops_vk import hook
from vkbackend import discovery

result = {"devices": len(discovery.query_physical_devices())}
opened = []
for name in ("VK", "VK:1", "VK:2"):
    result[name] = Device[name].vk.index
    opened.append(sorted(discovery.Instance._current._devices))
result["opened"] = opened
a = np.arange(1024, dtype=np.float32)
result["copy"] = bool((((Tensor(a, device="VK:0").to("VK:1") + 1).to("VK:0")).numpy() == a + 1).all())
report(result)
