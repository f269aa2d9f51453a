"""Checks shared by the renderer passes that are on by default on every device but a CPU one."""

from __future__ import annotations

import types


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
