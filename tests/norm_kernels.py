"""Kernels for tests/test_check_norms.py: right and wrong answers to add_layernorm and add_rmsnorm."""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# mistakes, picked by a constexpr so that one kernel holds every variant (tl.constexpr: a compiled
# kernel may read a global only if it is one)
RIGHT, UNBIASED, EPS_OUTSIDE, SWAPPED, PADDED, NORM_X, H_IS_X, NAIVE_VAR, NO_WEIGHT, FP16_SUM, ROW_BLOCK, W_ROW = \
    map(tl.constexpr, range(12))


@triton.jit
def _ln_row_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, h_ptr, N, eps, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    # one program per row, the whole row in one block
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    offs = (row * BLOCK if MISTAKE == ROW_BLOCK else row * N) + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0)
    if MISTAKE != FP16_SUM:          # that mistake keeps the loads in their dtype: fp16 sums in fp16
        x = x.to(tl.float32)
        r = r.to(tl.float32)
    h = x + r
    if MISTAKE == H_IS_X:
        tl.store(h_ptr + offs, x.to(h_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(h_ptr + offs, h.to(h_ptr.dtype.element_ty), mask=mask)
    v = x if MISTAKE == NORM_X else h
    mean = tl.sum(v, axis=0) / N
    if MISTAKE == PADDED:
        d = v - mean
    else:
        d = tl.where(mask, v - mean, 0.0)
    if MISTAKE == UNBIASED:
        var = tl.sum(d * d, axis=0) / (N - 1)
    elif MISTAKE == NAIVE_VAR:
        var = tl.sum(v * v, axis=0) / N - mean * mean
    else:
        var = tl.sum(d * d, axis=0) / N
    if MISTAKE == EPS_OUTSIDE:
        norm = d / (tl.sqrt(var) + eps)
    else:
        norm = d * (1.0 / tl.sqrt(var + eps))
    if MISTAKE == W_ROW:             # the vectors indexed by the row, not the column (no mask: one value each)
        w = tl.load(w_ptr + row).to(tl.float32)
        b = tl.load(b_ptr + row).to(tl.float32)
    else:
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    if MISTAKE == SWAPPED:
        y = norm * b + w
    elif MISTAKE == NO_WEIGHT:
        y = norm + b
    else:
        y = norm * w + b
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _ln(x, r, w, b, eps=1e-5, mistake=RIGHT):
    y, h = torch.empty_like(x), torch.empty_like(x)
    _ln_row_kernel[(x.shape[0],)](x, r, w, b, y, h, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]),
                                  MISTAKE=mistake.value)
    return y, h


def add_layernorm(x, r, w, b, eps=1e-5):
    """Right: the lesson's kernel, one row per program, the whole row in registers."""
    return _ln(x, r, w, b, eps)


@triton.jit
def _ln_loop_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, h_ptr, N, eps, BLOCK: tl.constexpr):
    # one program per row, walking it BLOCK columns at a time, twice: sums shifted by the row's first
    # value (no cancellation when the mean is large), then normalise
    row = tl.program_id(0)
    base = row * N
    k = tl.load(x_ptr + base).to(tl.float32) + tl.load(r_ptr + base).to(tl.float32)
    s1 = tl.zeros([BLOCK], tl.float32)
    s2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        h = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(h_ptr + base + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        d = tl.where(mask, h - k, 0.0)
        s1 += d
        s2 += d * d
    mean_k = tl.sum(s1, axis=0) / N
    rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / N - mean_k * mean_k + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        h = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        y = (h - k - mean_k) * rstd * w + b
        tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def add_layernorm_loop(x, r, w, b, eps=1e-5):
    """Right, written differently: a loop over the row in blocks of 256, two passes."""
    y, h = torch.empty_like(x), torch.empty_like(x)
    _ln_loop_kernel[(x.shape[0],)](x, r, w, b, y, h, x.shape[1], eps, BLOCK=256)
    return y, h


def add_layernorm_stub(x, r, w, b, eps=1e-5):
    raise NotImplementedError("one program per row: load x and residual, h = x + residual, ...")


def ln_unbiased(x, r, w, b, eps=1e-5):
    """Wrong: the variance divided by N - 1."""
    return _ln(x, r, w, b, eps, UNBIASED)


def ln_eps_outside(x, r, w, b, eps=1e-5):
    """Wrong: 1 / (sqrt(var) + eps)."""
    return _ln(x, r, w, b, eps, EPS_OUTSIDE)


def ln_swapped(x, r, w, b, eps=1e-5):
    """Wrong: norm * bias + weight."""
    return _ln(x, r, w, b, eps, SWAPPED)


def ln_padded(x, r, w, b, eps=1e-5):
    """Wrong: h - mean not zeroed in the masked lanes, so they add mean² each to the variance."""
    return _ln(x, r, w, b, eps, PADDED)


def ln_norm_x(x, r, w, b, eps=1e-5):
    """Wrong: the statistics and the normalisation of x, not of h."""
    return _ln(x, r, w, b, eps, NORM_X)


def ln_h_is_x(x, r, w, b, eps=1e-5):
    """Wrong: stores x as the second output."""
    return _ln(x, r, w, b, eps, H_IS_X)


def ln_naive_var(x, r, w, b, eps=1e-5):
    """Wrong on rows with a large mean: var = E[h²] − E[h]², which cancels."""
    return _ln(x, r, w, b, eps, NAIVE_VAR)


def ln_no_weight(x, r, w, b, eps=1e-5):
    """Wrong: norm + bias."""
    return _ln(x, r, w, b, eps, NO_WEIGHT)


def ln_fp16_sums(x, r, w, b, eps=1e-5):
    """Wrong in fp16 on rows near 200: the loads stay fp16, so the row's sum overflows to inf (NaN follows)."""
    return _ln(x, r, w, b, eps, FP16_SUM)


def ln_row_block(x, r, w, b, eps=1e-5):
    """Wrong: row r placed at r * BLOCK, the block's power-of-two width, not at r * N."""
    return _ln(x, r, w, b, eps, ROW_BLOCK)


def ln_w_row(x, r, w, b, eps=1e-5):
    """Wrong: weight and bias loaded at w_ptr + row and b_ptr + row, one value a row."""
    return _ln(x, r, w, b, eps, W_ROW)


def ln_y_only(x, r, w, b, eps=1e-5):
    """Wrong: returns y alone."""
    return _ln(x, r, w, b, eps)[0]


def ln_eager(x, r, w, b, eps=1e-5):
    """Right numbers, over budget: eager PyTorch, two launches."""
    h = x + r
    return F.layer_norm(h, (x.shape[1],), w, b, eps), h


R_RIGHT, R_EPS_OUTSIDE, R_CENTRED, R_NORM_X, R_FP16_SUM, R_W_ROW_MASKED = map(tl.constexpr, range(6))


@triton.jit
def _rms_row_kernel(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, N, eps, BLOCK: tl.constexpr, MISTAKE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    r = tl.load(r_ptr + row * N + cols, mask=mask, other=0.0)
    if MISTAKE != R_FP16_SUM:        # that mistake keeps the loads in their dtype: h * h sums in fp16
        x = x.to(tl.float32)
        r = r.to(tl.float32)
    h = x + r
    tl.store(h_ptr + row * N + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
    v = x if MISTAKE == R_NORM_X else h
    if MISTAKE == R_CENTRED:
        v = tl.where(mask, v - tl.sum(v, axis=0) / N, 0.0)
    ms = tl.sum(v * v, axis=0) / N
    if MISTAKE == R_EPS_OUTSIDE:
        norm = v / (tl.sqrt(ms) + eps)
    else:
        norm = v * (1.0 / tl.sqrt(ms + eps))
    if MISTAKE == R_W_ROW_MASKED:    # the weight at w_ptr + row, one address, with the row's mask
        y = norm * tl.load(w_ptr + row, mask=mask).to(tl.float32)
    else:
        y = norm * tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _rms(x, r, w, eps=1e-6, mistake=R_RIGHT):
    y, h = torch.empty_like(x), torch.empty_like(x)
    _rms_row_kernel[(x.shape[0],)](x, r, w, y, h, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]),
                                   MISTAKE=mistake.value)
    return y, h


def add_rmsnorm(x, r, w, eps=1e-6):
    """Right: one row per program."""
    return _rms(x, r, w, eps)


def rms_eps_outside(x, r, w, eps=1e-6):
    return _rms(x, r, w, eps, R_EPS_OUTSIDE)


def rms_centred(x, r, w, eps=1e-6):
    return _rms(x, r, w, eps, R_CENTRED)


def rms_norm_x(x, r, w, eps=1e-6):
    return _rms(x, r, w, eps, R_NORM_X)


def rms_fp16_sums(x, r, w, eps=1e-6):
    """Wrong in fp16 on rows near 200: h * h summed in fp16 overflows to inf, so y = h / inf = 0."""
    return _rms(x, r, w, eps, R_FP16_SUM)


def rms_w_row_masked(x, r, w, eps=1e-6):
    """Wrong: the weight loaded at w_ptr + row with the row's mask, which Triton refuses."""
    return _rms(x, r, w, eps, R_W_ROW_MASKED)


def rms_eager(x, r, w, eps=1e-6):
    """Right numbers, over budget: three eager kernels and more."""
    h = x + r
    hf = h.float()
    return (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype), h


def add_rmsnorm_stub(x, r, w, eps=1e-6):
    raise NotImplementedError("h = x + residual; y = h / sqrt(mean(h²) + eps) · weight")
