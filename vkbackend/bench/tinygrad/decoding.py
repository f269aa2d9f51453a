"""What the decode scripts (``scripts/decode-wait.py``, ``scripts/decode-phases.py``) share: their command line (a
tinygrad device, how many tokens, ``--quick``) and ``bench --tinygrad``'s GPT-2 decoder on that device, warmed.

Nothing of tinygrad is imported here at first: :func:`warm_decoder_from_argv` sets ``DEV`` before it imports tinygrad,
which takes its default device from it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

__all__ = ["warm_decoder_from_argv"]


def warm_decoder_from_argv(
    doc: str, argv: Sequence[str] | None, tokens: int, tokens_help: str
) -> tuple[argparse.Namespace, Callable[[int, int], float], list[int]]:
    """A decode script's arguments (described by the first paragraph of its ``doc``; ``--tokens`` defaults to
    ``tokens``), then :func:`vkbackend.bench.tinygrad.cases.warm_gpt2_decoder` on the device they name: ``(args,
    token, seeded)``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("device", help="the tinygrad device: VK, CUDA, CPU, ...")
    parser.add_argument("--tokens", type=int, default=tokens, help=f"{tokens_help} (default {tokens})")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    args = parser.parse_args(argv)
    if args.tokens < 1:
        parser.error("--tokens must be at least 1")
    os.environ["DEV"] = args.device
    if args.device == "VK":
        import vkbackend.tinygrad  # noqa: F401, PLC0415 - the VK device, for a checkout that was never installed
    from vkbackend.bench.tinygrad.cases import warm_gpt2_decoder  # noqa: PLC0415 - imports tinygrad: after DEV

    token, seeded = warm_gpt2_decoder(args.device, args.quick)
    return args, token, seeded
