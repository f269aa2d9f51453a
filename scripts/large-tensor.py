#!/usr/bin/env python3
"""tinygrad tensors of several GiB on VK, against numpy: random int32 host data, its int64 sum and its tail.

    python3 scripts/large-tensor.py 5 20          # sizes in GiB
    python3 scripts/large-tensor.py --odd 5       # 3 more elements: the harder case, and a much slower one

Past the device's largest allocation a tensor is one sparse buffer (docs/architecture.md, "Large buffers"); its
kernels reach it by 64-bit address arithmetic. Each size prints whether the sum and the tail are exact, and how long
numpy and tinygrad took (upload, the reduction and the read-back). A length of whole multiples of 2^16 elements
tinygrad splits over many work groups; with ``--odd`` it gets 3 more elements, which tinygrad reduces in one loop of
a single invocation (minutes for a few GiB, and on a GPU shared with other work a risk of the driver's watchdog).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np


def main(argv: list[str]) -> int:
    odd = "--odd" in argv
    argv = [a for a in argv if a != "--odd"]
    if not argv:
        print(__doc__)
        return 2
    os.environ["DEV"] = "VK"
    from tinygrad import Tensor, dtypes

    import vkbackend.tinygrad  # noqa: F401  (registers the VK device)

    rng = np.random.default_rng(0)
    status = 0
    for gib in (float(x) for x in argv):
        n = int(gib * (1 << 30)) // 4 >> 16 << 16
        n += 3 if odd else 0
        t0 = time.perf_counter()
        a = rng.integers(-1000, 1000, n, dtype=np.int32)
        want = int(a.sum(dtype=np.int64))
        t1 = time.perf_counter()
        try:
            t = Tensor(a)
            got = int(t.sum(dtype=dtypes.int64).item())
            t2 = time.perf_counter()
            tail_ok = bool(np.array_equal((t[-1000:] + 1).numpy(), a[-1000:] + 1))
            sum_text = "exact" if got == want else f"WRONG ({got} against {want})"
            print(
                f"{gib:g} GiB ({n} int32): sum {sum_text}, tail {'exact' if tail_ok else 'WRONG'}; "
                f"numpy {t1 - t0:.1f} s, tinygrad {t2 - t1:.1f} s",
                flush=True,
            )
            status |= got != want or not tail_ok
            del t
        except Exception as error:  # reported, then the next size
            print(f"{gib:g} GiB: {type(error).__name__}: {error}", flush=True)
            status = 1
        del a
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
