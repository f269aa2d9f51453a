"""The runtime: tinygrad's ``VK`` device on :class:`vkbackend.Device`.

:mod:`~vkbackend.tinygrad.runtime.ops_vk` holds ``VKDevice``, ``VKAllocator`` and ``VKProgram`` (tinygrad reaches it as
``tinygrad.runtime.ops_vk`` through :mod:`vkbackend.tinygrad._hook`); ``graph`` replays a JIT batch as one
:class:`vkbackend.LaunchGraph`; ``device_caps`` reads a device's ``DeviceCaps`` for the renderer.
"""
