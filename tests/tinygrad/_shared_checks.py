"""Checks shared by the renderer passes that are on by default on every device but a CPU one: the arch token, the
switch, the arch that turns a pass on or off for the device under test, and results that match numpy."""

from __future__ import annotations

import types


def check_arch_token(base, field: str, token: str, value: int) -> None:
    """``DeviceCaps`` ``base`` with ``field`` at ``value`` travels in the arch as ``<token><value>`` and back; at 0
    (as in ``base``) the token is left out."""
    import dataclasses  # noqa: PLC0415

    from vkbackend.tinygrad.renderer.caps import make_arch, parse_arch  # noqa: PLC0415

    caps = dataclasses.replace(base, **{field: value})
    assert f"{token}{value}" in make_arch(caps).split(",") and parse_arch(make_arch(caps)) == caps
    assert token not in make_arch(base) and getattr(parse_arch(make_arch(base)), field) == 0


def check_on_but_on_cpu(switch_on, env: str, monkeypatch) -> None:
    """``switch_on(info)`` holds for every device type but ``cpu`` while ``env`` is unset, everywhere with ``env=1``
    and nowhere with ``env=0``."""
    monkeypatch.delenv(env, raising=False)
    gpu, cpu = types.SimpleNamespace(device_type="discrete_gpu"), types.SimpleNamespace(device_type="cpu")
    assert switch_on(gpu) and not switch_on(cpu)
    for kind in ("integrated_gpu", "virtual_gpu", "other"):
        assert switch_on(types.SimpleNamespace(device_type=kind)), kind
    monkeypatch.setenv(env, "1")
    assert switch_on(cpu)
    monkeypatch.setenv(env, "0")
    assert not switch_on(gpu)


def archs_with_subgroup_lanes(vk_device, field: str) -> tuple[str, str]:
    """``DEV`` strings for tinygrad's VK device ``vk_device`` with the ``DeviceCaps`` ``field`` (a pass's lanes) set
    to the device's subgroup size, and at 0 (off; on lavapipe a pass is off by default)."""
    import dataclasses  # noqa: PLC0415

    from vkbackend.tinygrad.renderer.caps import make_arch  # noqa: PLC0415

    caps = vk_device.renderer.caps
    on = dataclasses.replace(caps, **{field: vk_device.vk.info.subgroup_size})
    return f"VK::{make_arch(on)}", f"VK::{make_arch(dataclasses.replace(caps, **{field: 0}))}"


def check_same_bits_on_and_off(vk_device, field: str, compute, kernel_sources: list[str]) -> tuple[list, list[str]]:
    """``compute()``'s arrays on tinygrad's default device with a pass on (``field`` at the subgroup size, see
    :func:`archs_with_subgroup_lanes`), then off, equal bit for bit: each invocation computes the same values in the
    same order. Returns the arrays and the kernels' sources of the run with the pass on (``kernel_sources``: the
    fixture that records them)."""
    import numpy as np  # noqa: PLC0415
    from tinygrad import Context  # noqa: PLC0415

    on, off = archs_with_subgroup_lanes(vk_device, field)
    start = len(kernel_sources)
    with Context(DEV=on):
        got = compute()
    sources = kernel_sources[start:]
    with Context(DEV=off):
        want = compute()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    return got, sources


def check_this_device_unless_cpu(vk_device, field: str, env: str, monkeypatch) -> None:
    """With ``env`` unset, the caps read from ``vk_device`` set ``field`` to the subgroup size, but on a CPU device."""
    from vkbackend.tinygrad.runtime.device_caps import caps_from_info  # noqa: PLC0415

    monkeypatch.delenv(env, raising=False)
    info = vk_device.vk.info
    assert getattr(caps_from_info(info), field) == (0 if info.device_type == "cpu" else info.subgroup_size)


def check_matmul_and_1x1_convolution(
    rng, mkn: tuple[int, int, int], nchw: tuple[int, int, int, int], out: int, rtol: float = 1e-5
) -> None:
    """A float32 matmul of ``mkn`` and a 1x1 convolution of an ``nchw`` input to ``out`` channels, on tinygrad's
    default device, against numpy within ``rtol`` (and as much absolute tolerance)."""
    import numpy as np  # noqa: PLC0415
    from tinygrad import Tensor  # noqa: PLC0415

    m, k, n = mkn
    a, b = rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=rtol, atol=rtol)
    x = rng.uniform(-1, 1, nchw).astype(np.float32)
    w = rng.uniform(-1, 1, (out, nchw[1], 1, 1)).astype(np.float32)
    want = np.einsum("bchw,oc->bohw", x, w[:, :, 0, 0])
    np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w)).numpy(), want, rtol=rtol, atol=rtol)
