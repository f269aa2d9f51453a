"""tinygrad (==0.14.0) device ``VK`` backed by vkbackend: ``DEV=VK python -c "from tinygrad import Tensor; ..."``.

The package's .pth file registers ``tinygrad.runtime.ops_vk`` at interpreter start-up; importing this subpackage
does it too (for a source checkout that was never installed).  vkbackend itself never imports tinygrad: only this
subpackage does, and only on demand.  See docs/tinygrad.md.
"""

from vkbackend.tinygrad._hook import install

install()

__all__ = ["install"]
