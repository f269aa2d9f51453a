"""Buffer, the owning handle on a buffer id, and DLPack for host data (on lavapipe)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from _reliability import REPO, run_isolated, run_script

import vkbackend
from vkbackend import Buffer, DLPackExportError, DType, ErrorStatus, InvalidArgumentError, InvalidArgumentTypeError
from vkbackend.interop.dlpack import _DLTensorHead, _get_pointer  # to make a producer claim a type numpy lacks

SHAPES = [(1,), (7,), (3, 5), (2, 3, 4)]
DTYPES = [np.bool_, np.uint8, np.int16, np.float16, np.int32, np.float32, np.int64, np.float64, np.complex64]


def sample(dtype, shape) -> np.ndarray:
    values = np.random.default_rng(len(shape)).integers(-100, 100, shape)
    return (values > 0 if dtype is np.bool_ else values).astype(dtype)


def live(pool) -> int:
    return pool.stats()["live_buffers"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_round_trip(device, dtype, shape):
    data = sample(dtype, shape)
    with Buffer.from_numpy(device, data) as buf:
        assert buf.nbytes == data.nbytes and buf.device is device
        out = buf.to_numpy(data.dtype, data.shape)
    assert out.dtype == data.dtype and np.array_equal(out, data)


def test_non_contiguous_arrays_are_laid_out_in_c_order(device):
    grid = np.arange(24, dtype=np.int32).reshape(4, 6)
    for data in (grid.T, grid[::2, 1::2], grid[:, ::-1]):
        with Buffer.from_numpy(device, data) as buf:
            assert np.array_equal(buf.to_numpy(np.int32, data.shape), data)


def test_to_numpy_defaults_offsets_and_dtypes(device):
    data = np.arange(16, dtype=np.uint32)
    with Buffer.from_numpy(device, data) as buf:
        assert np.array_equal(buf.to_numpy(), data)  # its own dtype and shape
        assert np.array_equal(buf.to_numpy(np.uint8), data.view(np.uint8))  # every byte, as uint8
        assert np.array_equal(buf.to_numpy(np.uint32), data)  # every element, 1-D
        assert np.array_equal(buf.to_numpy("uint32", offset=8), data[2:])  # the rest from a byte offset
        assert np.array_equal(buf.to_numpy(DType.uint32, 3, offset=4), data[1:4])
        assert np.array_equal(buf.to_numpy(np.uint16, (2, 2)), data.view(np.uint16)[:4].reshape(2, 2))


def test_write_at_offsets(device):
    with Buffer(device, 64) as buf:
        buf.write(np.zeros(16, np.float32))
        buf.write(np.array([1.5, 2.5], np.float32), offset=8)
        buf.write(bytes([0, 0, 128, 63]))  # any buffer-protocol object: 1.0
        buf.write(np.arange(8, dtype=np.float32).reshape(2, 4)[:, ::2], offset=32)  # laid out in C order first
        expected = np.zeros(16, np.float32)
        expected[[0, 2, 3]] = [1.0, 1.5, 2.5]
        expected[8:12] = [0, 2, 4, 6]
        assert np.array_equal(buf.to_numpy(np.float32), expected)


def test_a_buffer_id_binds_to_launches(device, kernel):
    affine = kernel("affine")
    x = np.arange(256, dtype=np.float32)
    with Buffer.from_numpy(device, x) as src, Buffer(device, x.nbytes) as dst:
        device.launch(affine, [src.id, dst.id], [2.0, 1.0, 256], (4, 1, 1))
        assert np.array_equal(dst.to_numpy(np.float32), 2 * x + 1)


def test_views(device, pool):
    align = device.info.min_storage_buffer_offset_alignment
    data = np.arange(4 * align, dtype=np.uint8)
    before = live(pool)
    parent = Buffer.from_numpy(device, data)
    view = parent.view(align, 2 * align)
    inner = view.view(align, align)  # a view of a view
    assert view.nbytes == 2 * align and live(pool) == before + 3
    assert np.array_equal(view.to_numpy(), data[align : 3 * align])
    parent.close()  # the views keep its memory
    view.write(np.full(align, 7, np.uint8))
    assert np.array_equal(view.to_numpy()[:align], np.full(align, 7, np.uint8))
    assert np.array_equal(inner.to_numpy(), data[2 * align : 3 * align])
    view.close()
    inner.close()
    assert live(pool) == before
    with Buffer(device, 4 * align) as whole:
        if align > 1:
            with pytest.raises(InvalidArgumentError, match="multiple"):
                whole.view(1, align)
        with pytest.raises(InvalidArgumentError, match="does not fit"):
            whole.view(0, 8 * align)


def test_with_closes_even_on_error(device, pool):
    before = live(pool)
    with pytest.raises(RuntimeError):
        with Buffer(device, 256) as buf:
            assert live(pool) == before + 1 and not buf.closed
            raise RuntimeError("inside the block")
    assert buf.closed and live(pool) == before


def test_use_after_close_raises(device, pool):
    buf = Buffer(device, 64)
    buf_id = buf.id
    buf.close()
    buf.close()  # idempotent
    assert buf.closed and "(closed)" in repr(buf)
    for use in (lambda: buf.id, lambda: buf.nbytes, buf.to_numpy, lambda: buf.write(b"x"), lambda: buf.view(0, 16)):
        with pytest.raises(InvalidArgumentError, match="is closed") as caught:
            use()
        assert isinstance(caught.value, ValueError) and caught.value.status is ErrorStatus.InvalidArgument
    with pytest.raises(InvalidArgumentError, match="not a live buffer"):
        pool.size_of(buf_id)  # the id itself was released


def test_finalizer_releases(device, pool):
    before = live(pool)
    buf = Buffer(device, 128)
    view = buf.view(0, 64)
    assert live(pool) == before + 2
    del buf, view  # refcounting: released at once
    assert live(pool) == before


def test_buffers_of_a_closed_device_and_of_a_forked_parent():
    result = run_isolated("buffer_closed_and_forked")
    assert result["fork_exit"] == 10 and result["after_fork"] == 3, result
    assert result["closed"] and result["unraisable"] == [], result
    assert result["validation"] == ""


def test_buffers_left_open_at_exit():
    """No finalizer runs at exit (closing the devices frees every buffer); nothing is raised or printed."""
    proc = run_script("buffer_left_open_at_exit")
    assert (proc.returncode, proc.stderr) == (0, "")


NUMPY_VERSION = tuple(int(part) for part in np.__version__.split(".")[:2])
NUMPY_2_1 = NUMPY_VERSION >= (2, 1)  # from_dlpack's device= and copy=


class Asker:
    """A DLPack consumer's request for a host copy, as ``numpy.from_dlpack(buf, device="cpu")`` makes it, for numpy
    versions whose from_dlpack has no ``device=``."""

    def __init__(self, buf: Buffer) -> None:
        self.buf = buf

    def __dlpack__(self, **kwargs):
        return self.buf.__dlpack__(dl_device=(1, 0))

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class Producer:
    """A DLPack producer that claims to live on ``device`` and delegates the export to a numpy array."""

    def __init__(self, device: tuple[int, int], array: np.ndarray | None = None) -> None:
        self.device, self.array = device, array

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, **kwargs):
        if self.array is None:
            raise BufferError("this producer cannot export")
        return self.array.__dlpack__(**kwargs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16, np.float32, np.float64, np.bool_])
def test_from_dlpack_numpy(device, dtype):
    data = sample(dtype, (3, 4))
    for source, expected in ((data, data), (data.T, data.T), (Producer((1, 0), data), data)):
        if isinstance(source, Producer) and dtype is np.bool_ and NUMPY_VERSION < (1, 25):
            with pytest.raises(InvalidArgumentError, match="numpy cannot import the Producer"):
                Buffer.from_dlpack(device, source)  # numpy's DLPack has bool from 1.25
            continue
        with Buffer.from_dlpack(device, source) as buf:
            assert np.array_equal(buf.to_numpy(expected.dtype, expected.shape), expected)


def test_from_dlpack_refuses_what_is_not_on_the_host(device, pool):
    before = live(pool)
    with pytest.raises(InvalidArgumentTypeError, match="__dlpack__"):
        Buffer.from_dlpack(device, [1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"\(2, 0\) \(CUDA\).*tensor\.cpu\(\)"):
        Buffer.from_dlpack(device, Producer((2, 0), np.zeros(4)))
    with pytest.raises(InvalidArgumentError, match="cannot import the Producer: this producer cannot export"):
        Buffer.from_dlpack(device, Producer((1, 0)))
    with Buffer(device, 16) as buf, pytest.raises(InvalidArgumentError, match=r"\(7, \d+\) \(Vulkan\)"):
        Buffer.from_dlpack(device, buf)
    assert live(pool) == before


def test_dlpack_export_is_a_host_copy_on_request_only(device):
    data = np.arange(8, dtype=np.float32)
    with Buffer.from_numpy(device, data) as buf:
        assert buf.__dlpack_device__() == (7, device.index)  # kDLVulkan: where the bytes are
        with pytest.raises(DLPackExportError, match="no host pointer") as caught:
            np.from_dlpack(buf)  # in place: not possible
        assert isinstance(caught.value, BufferError) and caught.value.status is ErrorStatus.InvalidArgument
        assert "numpy.asarray(buf)" in str(caught.value)  # what works on every numpy
        if NUMPY_2_1:
            host = np.from_dlpack(buf, device="cpu")  # dl_device=(kDLCPU, 0): a host copy
            assert host.dtype == np.float32 and np.array_equal(host, data)
            with pytest.raises(DLPackExportError, match="copy=False"):
                np.from_dlpack(buf, device="cpu", copy=False)
        host = np.from_dlpack(Asker(buf))  # any numpy: a consumer that asks
        assert host.dtype == np.float32 and np.array_equal(host, data)
        with pytest.raises(DLPackExportError, match="takes no stream"):
            buf.__dlpack__(stream=1, dl_device=(1, 0))
        with pytest.raises(DLPackExportError, match=r"to DLPack device \(2, 0\)"):
            buf.__dlpack__(dl_device=(2, 0))
        typed = buf.to_numpy(np.float32, (2, 4))  # the typed host copy exports itself
        assert np.array_equal(np.from_dlpack(typed), data.reshape(2, 4))


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (it is not a test dependency)")
    from vkbackend import devices

    device = devices()[0]
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    with Buffer.from_dlpack(device, tensor) as buf:
        back = torch.from_dlpack(buf.to_numpy(np.float32, (3, 4)))
        assert torch.equal(back, tensor)
        with pytest.raises(BufferError):
            torch.from_dlpack(buf)


def test_bad_input(device, pool):
    before = live(pool)
    with pytest.raises(InvalidArgumentTypeError, match="vkbackend.Device"):
        Buffer(pool, 16)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="positive byte count"):
        Buffer(device, 0)
    with pytest.raises(InvalidArgumentTypeError, match="numpy array"):
        Buffer.from_numpy(device, [1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no bytes"):
        Buffer.from_numpy(device, np.zeros((0, 3)))
    with pytest.raises(InvalidArgumentTypeError, match="not plain data"):
        Buffer.from_numpy(device, np.array([object()]))
    with Buffer(device, 6) as buf:
        with pytest.raises(InvalidArgumentError, match="not whole float32 elements"):
            buf.to_numpy(np.float32)
        with pytest.raises(InvalidArgumentError, match="do not fit"):
            buf.to_numpy(np.float32, 2)
        with pytest.raises(InvalidArgumentError, match="bad shape"):
            buf.to_numpy(np.uint8, -1)
        with pytest.raises(InvalidArgumentError, match="offset 7"):
            buf.to_numpy(offset=7)
        with pytest.raises(InvalidArgumentTypeError, match="not a numpy dtype"):
            buf.to_numpy("no such type")
        with pytest.raises(InvalidArgumentTypeError, match="not plain data"):
            buf.to_numpy(object)
        with pytest.raises(InvalidArgumentTypeError, match="bfloat16"):
            buf.to_numpy(DType.bfloat16)  # numpy has none
        with pytest.raises(InvalidArgumentError, match="do not fit"):
            buf.write(np.zeros(4, np.uint16))
        with pytest.raises(InvalidArgumentTypeError, match="buffer-protocol"):
            buf.write("text")  # type: ignore[arg-type]
    assert live(pool) == before


def test_import_vkbackend_loads_each_public_name_on_first_use():
    """``import vkbackend`` imports none of its modules, the native one and numpy included (tinygrad's compile workers
    import it, each in a fresh process); each public name then comes from its module, ``vkbackend.Buffer`` with
    numpy."""
    script = (
        "import sys, vkbackend\n"
        "print(sorted(m for m in sys.modules if m.startswith('vkbackend') or m in ('numpy', '_cffi_backend')))\n"
        "vkbackend.Device; print('numpy' in sys.modules)\n"
        "vkbackend.Buffer; print('numpy' in sys.modules)\n"
        "print(all(getattr(vkbackend, n).__module__.startswith('vkbackend.') for n in vkbackend.__all__))\n"
        "print(set(vkbackend.__all__) <= set(dir(vkbackend)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines() == ["['vkbackend']", "False", "True", "True", "True"], proc.stderr
    with pytest.raises(AttributeError, match="no attribute 'Devic'"):
        vkbackend.Devic  # noqa: B018


@pytest.mark.parametrize("dtype, shape", [(np.float32, (3, 4)), (np.int16, (5,)), (np.int16, (2, 3, 2))])
def test_buffers_keep_dtype_and_shape(device, dtype, shape):
    data = sample(dtype, shape)
    with Buffer.from_numpy(device, data) as buf:
        assert (buf.dtype, buf.shape, buf.nbytes) == (data.dtype, data.shape, data.nbytes)
        for host in (buf.to_numpy(), np.asarray(buf), np.array(buf), np.from_dlpack(Asker(buf))):
            assert host.dtype == data.dtype and host.shape == data.shape and np.array_equal(host, data)
        assert np.asarray(buf, dtype=np.float64).dtype == np.float64  # numpy's conversion
        assert np.array_equal(buf.to_numpy(np.uint8), data.view(np.uint8).ravel())  # bytes, on request
        assert f"{data.dtype} {data.shape}" in repr(buf)
    with Buffer.from_dlpack(device, data) as buf:
        assert (buf.dtype, buf.shape) == (data.dtype, data.shape)


def test_typed_buffers_from_a_shape(device, pool):
    with Buffer(device, shape=(3, 4), dtype=np.float32) as buf:
        assert (buf.dtype, buf.shape, buf.nbytes) == (np.float32, (3, 4), 48)
        buf.write(np.arange(12, dtype=np.float32))
        assert np.array_equal(np.asarray(buf), np.arange(12, dtype=np.float32).reshape(3, 4))
    with Buffer(device, 12, dtype=DType.int16) as buf:  # a size: 1-D
        assert (buf.dtype, buf.shape) == (np.int16, (6,))
    with Buffer(device, 8, dtype="int16", shape=np.int64(4)) as buf:  # both, agreeing
        assert buf.shape == (4,)
    with Buffer(device, 5) as buf:  # bytes by default
        assert (buf.dtype, buf.shape) == (np.uint8, (5,)) and np.asarray(buf).shape == (5,)
    before = live(pool)
    with pytest.raises(InvalidArgumentError, match="not whole float32 elements"):
        Buffer(device, 6, dtype=np.float32)
    with pytest.raises(InvalidArgumentError, match=r"12 bytes, not the 8 given"):
        Buffer(device, 8, dtype=np.float32, shape=3)
    with pytest.raises(InvalidArgumentTypeError, match="its shape"):
        Buffer(device)
    with pytest.raises(InvalidArgumentError, match="negative"):
        Buffer(device, shape=(2, -1))
    with pytest.raises(InvalidArgumentTypeError, match="shape entry"):
        Buffer(device, shape=(2.0,))  # type: ignore[arg-type]
    assert live(pool) == before


def test_views_have_a_dtype_and_shape(device):
    align = device.info.min_storage_buffer_offset_alignment
    data = np.arange(4 * align, dtype=np.float32)
    with Buffer.from_numpy(device, data) as buf:
        with buf.view(align, 8 * align) as view:  # whole float32s: float32
            assert (view.dtype, view.shape) == (np.float32, (2 * align,))
            assert np.array_equal(np.asarray(view), data[align // 4 : align // 4 + 2 * align])
        with buf.view(0, 8 * align, dtype=np.int32, shape=(2, align)) as view:
            assert np.array_equal(np.asarray(view), data[: 2 * align].view(np.int32).reshape(2, align))
        with buf.view(0, 6) as view:  # not whole float32s: bytes
            assert (view.dtype, view.shape) == (np.uint8, (6,))
        with pytest.raises(InvalidArgumentError, match="not the 8 given"):
            buf.view(0, 8, dtype=np.float32, shape=3)


def test_a_numpy_array_of_a_buffer_is_always_a_copy(device):
    with Buffer.from_numpy(device, np.ones(4, np.float32)) as buf:
        with pytest.raises(InvalidArgumentError, match="always a copy") as caught:
            buf.__array__(copy=False)
        assert isinstance(caught.value, ValueError)
        if NUMPY_2_1:
            with pytest.raises(ValueError, match="always a copy"):
                np.array(buf, copy=False)
        host = np.asarray(buf)
        host[0] = 5  # the buffer is not changed
        assert buf.to_numpy()[0] == 1
    with pytest.raises(InvalidArgumentError, match="is closed"):
        np.asarray(buf)


class Retyped:
    """A CPU DLPack producer of ``array``'s bytes that calls them DLPack type ``code`` (4: bfloat): what a PyTorch
    bfloat16 tensor exports, without PyTorch. It always answers with the unversioned capsule."""

    def __init__(self, array: np.ndarray, code: int, bits: int) -> None:
        self.array, self.code, self.bits = array, code, bits

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __dlpack__(self, **kwargs):
        capsule = self.array.__dlpack__()
        head = _DLTensorHead.from_address(_get_pointer(capsule, b"dltensor"))
        head.dtype.code, head.dtype.bits = self.code, self.bits
        return capsule


def test_types_numpy_lacks_say_what_to_do(device, pool):
    before = live(pool)
    bf16 = Retyped(np.arange(6, dtype=np.int16), 4, 16)
    with pytest.raises(
        InvalidArgumentTypeError,
        match=r"holds bfloat16: numpy has no bfloat16, so move its bytes as "
        r"int16.*tensor\.view\(torch\.int16\)",
    ) as caught:
        Buffer.from_dlpack(device, bf16)
    assert caught.value.__cause__ is not None  # numpy's own refusal
    with pytest.raises(InvalidArgumentTypeError, match="holds float8_e4m3fn: .* as int8"):
        Buffer.from_dlpack(device, Retyped(np.zeros(4, np.uint8), 10, 8))
    with pytest.raises(InvalidArgumentError, match=r"its elements: float16x4"):
        Buffer.from_dlpack(device, LanesOf4())
    with Buffer.from_dlpack(device, np.arange(6, dtype=np.int16)) as buf:  # the way round it
        assert np.array_equal(np.asarray(buf), np.arange(6, dtype=np.int16))
    with Buffer(device, 8) as buf:
        for dtype in (DType.bfloat16, "bfloat16", "float8_e5m2", TorchLike("bfloat16")):
            with pytest.raises(
                InvalidArgumentTypeError,
                match=r"dtype (bfloat16|float8_e5m2) is not a numpy dtype; "
                r"numpy has no",
            ):
                buf.to_numpy(dtype)
        with pytest.raises(InvalidArgumentTypeError, match="numpy has no bfloat16"):
            Buffer(device, 8, dtype=DType.bfloat16)
        with pytest.raises(InvalidArgumentTypeError, match="pass numpy's name for it, 'float32'"):
            buf.to_numpy(TorchLike("float32"))
    assert live(pool) == before


def test_the_dtype_of_a_dlpack_capsule():
    from vkbackend.interop.dlpack import capsule_dtype

    assert capsule_dtype(np.zeros(2, np.float32).__dlpack__()) == "float32"
    assert capsule_dtype(Retyped(np.zeros(2, np.uint16), 4, 16).__dlpack__()) == "bfloat16"
    assert capsule_dtype(LanesOf4().__dlpack__()) == "float16x4"
    assert capsule_dtype(Retyped(np.zeros(2, np.uint8), 99, 8).__dlpack__()) == "DLPack type code 99 of 8 bits"
    if NUMPY_2_1:  # the versioned capsule
        assert capsule_dtype(np.zeros(2, np.complex64).__dlpack__(max_version=(1, 0))) == "complex64"
    assert capsule_dtype(object()) is None


class TorchLike:
    """A dtype object of another library, printed as PyTorch prints its dtypes (``torch.bfloat16``)."""

    def __init__(self, name: str) -> None:
        self.name_ = name

    def __repr__(self) -> str:
        return f"torch.{self.name_}"


class LanesOf4(Retyped):
    """float16 in vectors of four lanes: a DLPack type numpy refuses that is not a type it lacks."""

    def __init__(self) -> None:
        super().__init__(np.zeros(8, np.uint16), 2, 16)

    def __dlpack__(self, **kwargs):
        capsule = super().__dlpack__()
        _DLTensorHead.from_address(_get_pointer(capsule, b"dltensor")).dtype.lanes = 4
        return capsule
