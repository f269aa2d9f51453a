"""Command-line conventions of ``python -m vkbackend``: ``--version``, ``info --json``, help for every option, the
program's name as it was run (``-m`` or the console script), a clean message and exit status for a device that does
not exist or an output that cannot be written, usage errors on one line with status 2, units that fit the figures,
``--json -`` on stdout, and no traceback when the reader of stdout goes away (``| head``). Most run the command in a
fresh process."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from _reliability import run_script

import vkbackend
from vkbackend import cli
from vkbackend.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run(
        [sys.executable, "-m", "vkbackend", *args], capture_output=True, text=True, env=full, cwd=ROOT, timeout=300
    )


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout == f"vkbackend {vkbackend.__version__}\n"


# What pip writes for a [project.scripts] entry: the console script is not run with -m.
CONSOLE_SCRIPT = """import re, sys
from vkbackend.__main__ import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


@pytest.mark.parametrize("how", ["module", "script"])
def test_the_program_names_itself_as_it_was_run(how, tmp_path):
    """``python3 -m vkbackend`` in help and errors when run with -m, ``vkbackend`` when run as the console script."""
    if how == "module":
        command, name = [sys.executable, "-m", "vkbackend"], f"{os.path.basename(sys.executable)} -m vkbackend"
    else:
        script = tmp_path / "vkbackend"
        script.write_text(CONSOLE_SCRIPT)
        command, name = [sys.executable, str(script)], "vkbackend"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    helped = subprocess.run([*command, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {name} [-h]"), helped.stdout
    sub = subprocess.run([*command, "demo", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert sub.stdout.startswith(f"usage: {name} demo [-h]"), sub.stdout
    wrong = subprocess.run([*command, "nope"], capture_output=True, text=True, env=env, timeout=120)
    assert wrong.returncode == 2 and wrong.stderr.startswith(f"{name}: error: "), wrong.stderr
    assert wrong.stderr.rstrip().endswith(f"(see {name} --help)"), wrong.stderr


def test_info_piped_into_head_ends_cleanly(device):
    """``python -m vkbackend info | head -1``: the first line, and no traceback whether or not the writer was still
    writing when head left (status 0, or 1 for the write that failed)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    line = f"set -o pipefail; {shlex.quote(sys.executable)} -m vkbackend info | head -1"
    result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert result.returncode in (0, 1), result.stderr
    assert (
        result.stdout == f"device {device.index}: {device.info.name} ({device.info.device_type}, vendor "
        f"{device.info.vendor_id:#06x}, device {device.info.device_id:#06x})\n"
    )
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr


class _Parsed(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    """The parser ``main`` builds, caught as it parses."""
    seen: list[argparse.ArgumentParser] = []

    def catch(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        seen.append(self)
        raise _Parsed

    with mock.patch.object(argparse.ArgumentParser, "parse_args", catch), pytest.raises(_Parsed):
        main(["info"])
    return seen[0]


def test_every_command_and_option_has_help():
    parser = _parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert (
        {c.dest for c in commands._choices_actions if c.help}
        == set(commands.choices)
        == {"info", "demo", "bench", "doctor"}
    )
    for name, sub in [("", parser), *commands.choices.items()]:
        bare = [a.option_strings for a in sub._actions if a.option_strings and not a.help]
        assert not bare, f"options of '{name}' without help: {bare}"
    for name in commands.choices:  # and --help itself works
        result = run(name, "--help")
        assert result.returncode == 0 and "usage:" in result.stdout, result.stderr


def test_info_json(device):
    result = run("info", "--json")
    assert result.returncode == 0, result.stderr
    (first, *_) = json.loads(result.stdout)
    fields = {f.name for f in dataclasses.fields(vkbackend.DeviceInfo)}
    assert set(first) == fields | {"index", "free_bytes", "driver_version_text", "vkbackend_version"}
    assert first["driver_version"] == device.info.driver_version  # the raw number, which scripts read
    assert first["driver_version_text"] == cli.driver_version(device.info.vendor_id, device.info.driver_version)
    assert first["vkbackend_version"] == vkbackend.__version__
    assert first["index"] == device.index and first["name"] == device.info.name
    assert first["max_local_work_dims"] == list(device.info.max_local_work_dims)
    assert first["dtype_capabilities"]["float32"] == sorted(device.info.dtype_capabilities[vkbackend.DType.float32])
    assert first["memory_heaps"][0].keys() == {"size", "device_local", "budget"}


def test_demo_on_a_device_that_does_not_exist(device):
    result = run("demo", "--device", "5")
    assert result.returncode == 2
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert "cannot open device 5" in result.stderr and "device id 5 does not exist" in result.stderr


def test_demo_without_glslang_says_how_to_install_it(device):
    """No libglslang and no glslangValidator on PATH or from the glsl extra: one line saying what to install, no
    traceback."""
    result = run_script("cli_demo_without_glslang", timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("vkbackend demo: glslangValidator was not found")
    assert "apt-get install glslang-tools" in result.stderr and "pip install 'vkbackend[glsl]'" in result.stderr


def test_bench_refuses_an_output_it_cannot_write_before_it_runs(tmp_path):
    result = run("bench", "--quick", "--json", str(tmp_path / "missing" / "bench.json"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"the directory {tmp_path / 'missing'} does not exist" in result.stderr
    result = run("bench", "--quick", "--json", str(tmp_path))
    assert result.returncode == 2 and "is a directory" in result.stderr


def test_bench_refuses_an_unknown_case_before_it_runs():
    result = run("bench", "--quick", "--cases", "sync_idle,no_such_case")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "unknown case 'no_such_case'" in result.stderr and "readback_small" in result.stderr
    assert result.stdout == ""


def test_bench_plot_without_matplotlib_fails_before_it_runs(tmp_path):
    """With a matplotlib that cannot be imported shadowing any real one."""
    fake = tmp_path / "site" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib in this test')\n")
    result = run(
        "bench",
        "--quick",
        "--plot",
        str(tmp_path / "bench.png"),
        PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "pip install 'vkbackend[bench]'" in result.stderr
    assert not (tmp_path / "bench.png").exists()


def test_an_output_the_run_did_not_write_is_reported(tmp_path):
    written, stale, missing = tmp_path / "written.json", tmp_path / "stale.png", tmp_path / "missing.png"
    stale.write_text("from an earlier run")
    outputs = {"--json": str(written), "--plot": str(stale)}
    before = cli.output_stamps(outputs)
    written.write_text("[]")
    assert cli.unwritten_outputs(outputs, before) == [f"--plot {stale} was not written"]
    assert cli.unwritten_outputs({"--plot": str(missing)}, cli.output_stamps({"--plot": str(missing)})) == [
        f"--plot {missing} was not written"
    ]
    assert cli.unwritten_outputs({"--json": None}, {}) == []


@pytest.mark.parametrize("args", [["info"], ["info", "--json"], ["demo"], ["doctor"]])
def test_no_traceback_when_the_reader_goes_away(device, args):
    """Like ``python -m vkbackend info | head -1``: the pipe is closed before anything is written, so every write
    fails; the command ends quietly with status 1."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vkbackend", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--tinygrad", "--timeout", "-5"],
        ["bench", "--tinygrad", "--timeout", "0"],
        ["bench", "--tinygrad", "--timeout", "soon"],
        ["bench", "--timeout", "5"],
        ["bench", "--plot", "-"],
        ["bench", "--no-such-option"],
        ["nope"],
    ],
)
def test_a_usage_error_is_one_line_with_status_2(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    # In-process, __main__ is pytest's, as it is the console script's: the name is the script's.
    assert err.count("\n") == 1 and re.match(r"vkbackend( bench)?: error: .*\(see vkbackend( bench)? --help\)$", err), (
        err
    )
    if "--timeout" in args and "--tinygrad" in args:
        assert "is not a positive number of seconds" in err or "is not a number of seconds" in err


def test_bench_tinygrad_refuses_a_device_that_does_not_exist(device, capsys):
    assert main(["bench", "--tinygrad", "--quick", "--device", "7"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--device 7: there is no such device" in err, err


def test_driver_version_is_decoded_per_vendor():
    nvidia = 580 << 22 | 159 << 14 | 4 << 6
    assert cli.driver_version(0x10DE, nvidia) == "580.159.4.0"
    assert cli.driver_version(0x1002, 23 << 22 | 3 << 12 | 6) == "23.3.6"  # Mesa's RADV: Vulkan's packing
    assert cli.driver_version(0x10005, 1) == "0.0.1"  # lavapipe, as vulkaninfo shows it
    assert cli.driver_text("NVIDIA", "580.159.04", 0x10DE, nvidia) == "NVIDIA, 580.159.04 (version 580.159.4.0)"
    assert cli.driver_text("", "", 0x10005, 1) == "version 0.0.1"  # a driver that names nothing


def test_info_picks_units_and_decodes_the_driver_version(device):
    result = run("info")
    assert result.returncode == 0, result.stderr
    i = device.info
    assert (
        i.driver_name and i.driver_info
    )  # every Vulkan 1.2 driver names itself (Mesa's: "llvmpipe", "Mesa 22.3.6 ...")
    assert (
        f", driver {i.driver_name}, {i.driver_info} (version {cli.driver_version(i.vendor_id, i.driver_version)})\n"
        in result.stdout
    )
    ((number, unit),) = re.findall(r"max storage range ([\d.]+) (B|KiB|MiB|GiB|TiB)", result.stdout)
    assert 1 <= float(number) < 1024, result.stdout
    scale = 1 << 10 * ["B", "KiB", "MiB", "GiB", "TiB"].index(unit)
    assert float(number) * scale == pytest.approx(i.max_storage_buffer_range, rel=5e-3)


def test_demo_picks_a_unit_for_its_speeds(device):
    result = run("demo")
    assert result.returncode == 0, result.stderr
    ((number, _),) = re.findall(r"\(([\d.]+) ([kMGTP]?FLOP/s)\)", result.stdout)
    assert 1 <= float(number) < 10_000, result.stdout
    for figure in re.findall(r"([\d.]+) [kMGT]?B/s", result.stdout):
        assert 1 <= float(figure) < 10_000, result.stdout


def test_bench_json_dash_writes_only_the_json_to_stdout(device, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-m", "vkbackend", "bench", "--quick", "--cases", "sync_idle", "--json", "-"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert {r["case"] for r in records} == {"sync_idle"} and records[0]["unit"] == "us"
    assert "sync_idle median" in result.stderr  # the table
    assert list(tmp_path.iterdir()) == []  # no file named "-"
