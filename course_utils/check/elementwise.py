"""Checkers for the element-wise exercises: vector_add (lesson 03) and bias_gelu."""
from __future__ import annotations

import math

import torch

from ..environment import DEVICE, pick
from ._core import Passed, budget, bounds_check_on_gpu, compare, run

__all__ = ["vector_add", "bias_gelu"]


def _randn(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


def vector_add(fn) -> Passed:
    """fn(x, y) -> x + y for 1-D tensors of any length."""
    result = Passed("vector_add")
    # Ragged lengths on purpose: 1, a prime, one past a power of two, one short of one.
    sizes = [1, 37, 1000, 1025, pick(gpu=(1 << 20) + 17, cpu=4095)]
    bounds_check_on_gpu(fn, _randn(1000), _randn(1000), name="vector_add")
    for dtype in (torch.float32, torch.float16):
        for n in sizes:
            x, y = _randn(n, dtype=dtype), _randn(n, dtype=dtype, scale=1e3)
            out = run(fn, x, y, name="vector_add")
            compare(out, (x.float() + y.float()).to(dtype), name="vector_add", like=x,
                    wrong_answers=[(x, "the output equals x: is y loaded and added?"),
                                   (y, "the output equals y: is x loaded and added?"),
                                   (x - y, "the output is x - y")])
            result.cases.append(f"{str(dtype)[6:]} n={n}")
    n = 4096
    result.traffic = budget(fn, (_randn(n), _randn(n)), name="vector_add", launches=1, bytes=3 * 4 * n)
    return result


def _gelu(v: torch.Tensor) -> torch.Tensor:
    return 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))


def bias_gelu(fn) -> Passed:
    """fn(x, b) -> gelu(x + b) for x of shape (M, N), b of shape (N,), exact (erf) GELU, in one kernel."""
    result = Passed("bias_gelu")
    shapes = [(1, 1), (3, 37), (16, 1000), (7, 1024), pick(gpu=(4096, 4099), cpu=(33, 257))]
    bounds_check_on_gpu(fn, _randn(5, 300), _randn(300), name="bias_gelu")
    for dtype in (torch.float32, torch.float16):
        for (m, n) in shapes:
            for scale in (1.0, 30.0):  # large magnitudes: the far tails of GELU must be 0 and x
                x, b = _randn(m, n, dtype=dtype, scale=scale), _randn(n, dtype=dtype)
                out = run(fn, x, b, name="bias_gelu")
                xf, bf = x.float(), b.float()
                v = xf + bf
                tanh_gelu = torch.nn.functional.gelu(v, approximate="tanh").to(dtype)
                compare(out, _gelu(v).to(dtype), name="bias_gelu", like=x, wrong_answers=[
                    (_gelu(xf).to(dtype), "this is gelu(x): the bias is never added."),
                    (v.to(dtype), "this is x + b: GELU is never applied."),
                    (torch.relu(v).to(dtype), "this is relu(x + b), not GELU."),
                    (_gelu(xf).to(dtype) + b, "this is gelu(x) + b: the bias goes in before the activation."),
                    (_gelu(xf + bf[:m, None]).to(dtype) if m <= n and m > 1 else None,
                     "the bias is indexed by row; it belongs to the columns (b[col])."),
                    (tanh_gelu if scale == 1.0 and not torch.equal(tanh_gelu, _gelu(v).to(dtype)) else None,
                     "this is the tanh approximation; the exercise asks for the exact form "
                     "0.5·v·(1 + erf(v/√2))."),
                ], overflow_hint="GELU of a large |v| is v or 0: an exp() that overflows? Use erf.")
                result.cases.append(f"{str(dtype)[6:]} {m}x{n}" + (" ×30" if scale != 1 else ""))
    m, n = 16, 256
    result.traffic = budget(fn, (_randn(m, n), _randn(n)), name="bias_gelu", launches=1,
                            bytes=4 * (2 * m * n + n))
    return result
