"""hints.explain turns the errors a first kernel runs into into one sentence, and hints.install makes
IPython print that sentence under the traceback.

The errors are real: launched (in the interpreter on a CPU, compiled and launched on a GPU), and also
compiled for an sm_90 target by Triton's front end, which needs no GPU, so both spellings of each error
are covered wherever the tests run. The CPU-tensor error only happens on a GPU: on a CPU its text is
taken from the installed Triton's launcher source, on a GPU it is made for real."""
import os

import pytest
import torch
import triton
import triton.language as tl

import course_utils as cu
from course_utils import _interp, hints
from course_utils.check import CheckFailed


# --- kernels with the classic mistakes ---------------------------------------------------------------
@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def copy_kernel_runtime_block(x_ptr, out_ptr, n, BLOCK):  # BLOCK lacks tl.constexpr
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def copy_kernel_no_mask(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def copy_kernel_byte_offsets(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * 4, mask=mask), mask=mask)


@triton.jit
def copy_kernel_that_raises(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    raise NotImplementedError("write the kernel")


@triton.jit
def plus_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.plus(v, v), mask=offs < n)


@triton.jit
def torch_add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, torch.add(v, v), mask=offs < n)


@triton.jit
def scale_kernel(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def indexed_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, x_ptr[offs], mask=offs < n)


@triton.jit
def scale_constexpr_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, SCALE * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def arange_n_kernel(x_ptr, out_ptr, n):
    offs = tl.arange(0, n)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def error_of(launch):
    try:
        launch()
    except Exception as e:  # noqa: BLE001
        return e
    pytest.fail("the launch should have raised")


def _restored(call):
    with _interp._language_restored():
        return call()


X = torch.randn(1000, device=cu.DEVICE)
OUT = torch.empty_like(X)
ON_A_GPU = cu.ON_GPU and not cu.INTERPRET

LAUNCHES = {
    "non-power-of-2 arange": (lambda: copy_kernel[(4,)](X, OUT, 1000, BLOCK=300), "power-of-two BLOCK"),
    "missing constexpr": (lambda: copy_kernel_runtime_block[(4,)](X, OUT, 1000, 256), "BLOCK: tl.constexpr"),
    "raise in a kernel": (lambda: copy_kernel_that_raises[(4,)](X, OUT, 1000, BLOCK=256), "cannot raise"),
    "grid not a tuple": (lambda: copy_kernel[4](X, OUT, 1000, BLOCK=256), "must be a tuple"),
    "grid of floats": (lambda: copy_kernel[(1000 / 256,)](X, OUT, 1000, BLOCK=256), "triton.cdiv"),
    "block too large": (lambda: copy_kernel[(1,)](X, OUT, 1000, BLOCK=2**21), "larger than Triton allows"),
    "number for a pointer": (lambda: copy_kernel[(4,)](1.5, OUT, 1000, BLOCK=256), "order of the arguments"),
    "size left out": (lambda: copy_kernel[(4,)](X, OUT, BLOCK=256), "not always the one forgotten"),
    "no such tl function": (lambda: plus_kernel[(4,)](X, OUT, 1000, BLOCK=256), "no function of that name"),
    "torch inside a kernel": (lambda: torch_add_kernel[(4,)](X, OUT, 1000, BLOCK=256), "only Triton's functions"),
    "a tensor for a scalar": (lambda: scale_kernel[(4,)](X, OUT, torch.tensor(2.0, device=cu.DEVICE), 1000, BLOCK=256),
                              "pass a plain Python number"),
    "a pointer indexed like a tensor": (lambda: indexed_kernel[(4,)](X, OUT, 1000, BLOCK=256), "tl.load(x_ptr + offsets"),
    "a shape for a size": (lambda: copy_kernel[(4,)](X, OUT, X.shape, BLOCK=256), "x.numel()"),
    "a tensor for a constexpr": (lambda: scale_constexpr_kernel[(4,)](X, OUT, 1000, SCALE=torch.tensor(0.99),
                                                                       BLOCK=256), "a plain Python number there"),
    "runtime size in arange": (lambda: arange_n_kernel[(1,)](X, OUT, 1000), "cannot shape a block"),
    "one argument too many": (lambda: copy_kernel[(4,)](X, OUT, 1000, 256, BLOCK=256), "arrived twice"),
    # a call without a grid leaves the interpreter's builtins in triton.language: restored, as after a replay,
    # so that the GPU compiles below do not meet them (only a process that interprets and compiles does)
    "called without a grid": (lambda: _restored(lambda: copy_kernel(X, OUT, 1000, BLOCK=256)), "launched with a grid"),
}


@pytest.mark.parametrize("case", LAUNCHES)
def test_explains_launch_errors(case):
    launch, says = LAUNCHES[case]
    hint = hints.explain(error_of(launch))
    assert hint is not None and says in hint, hint


@pytest.mark.skipif(ON_A_GPU, reason="on a GPU an unmasked store corrupts memory instead of raising")
def test_byte_offsets_are_named_not_the_mask():
    e = error_of(lambda: copy_kernel_byte_offsets[(4,)](X, OUT, 1000, BLOCK=256))
    assert isinstance(e, _interp.OutOfBounds) and "Do the offsets count bytes?" in str(e), str(e)
    assert "`x_ptr + offsets` counts elements" in str(e)


@pytest.mark.skipif(ON_A_GPU, reason="on a GPU an unmasked store corrupts memory instead of raising")
def test_explains_out_of_bounds():
    e = error_of(lambda: copy_kernel_no_mask[(4,)](X, OUT, 1000, BLOCK=256))
    assert isinstance(e, _interp.OutOfBounds) and "Mask the tail" in hints.explain(e)


# --- the same mistakes as a GPU compile reports them -----------------------------------------------
def _np2(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs, mask=offs < n)


def _runtime_block(x_ptr, n, BLOCK):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs, mask=offs < n)


def _raises(x_ptr, n, BLOCK: tl.constexpr):
    raise NotImplementedError("write the kernel")


def _torch_add(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, torch.add(v, v), mask=offs < n)


def _indexed(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, x_ptr[offs] * 2, mask=offs < n)


def compile_error_for_gpu(fn, block_is_constexpr: bool, block: int = 256):
    """Compile fn for sm_90 with Triton's front end, which runs on a CPU; return the error."""
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, CompilationError
        from triton.runtime.jit import JITFunction
        signature = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr" if block_is_constexpr else "i32"}
        src = ASTSource(fn=JITFunction(fn), signature=signature,
                        constexprs={(2,): block} if block_is_constexpr else {})
    except (ImportError, TypeError) as e:  # Triton moved its internals: the interpreter tests still run
        pytest.skip(f"this Triton's compile API differs: {e}")
    try:
        # triton.language as imported: a reduction interpreted earlier in this process (another test's) may have
        # left the interpreter's patches behind, which the compiler must not meet
        with _interp.language_as_imported():
            triton.compile(src, target=GPUTarget("cuda", 90, 32))
    except CompilationError as e:
        return e
    except RuntimeError as e:        # a function Triton cannot compile is refused before code generation
        if "Unsupported function" in str(e):
            return e
        pytest.skip(f"front-end compile unavailable here: {type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"front-end compile unavailable here: {type(e).__name__}: {e}")
    pytest.fail("the compile should have failed")


@pytest.mark.filterwarnings("ignore:TRITON_DEFAULT_FP_FUSION")   # a Triton 3.9 notice about compiling
@pytest.mark.parametrize("fn, constexpr, block, says", [
    (_np2, True, 300, "power-of-two BLOCK"),
    (_runtime_block, False, 256, "BLOCK: tl.constexpr"),
    (_raises, True, 256, "cannot raise"),
    (_torch_add, True, 256, "only Triton's functions"),
    (_indexed, True, 256, "tl.load(x_ptr + offsets"),
])
def test_explains_gpu_compile_errors(fn, constexpr, block, says):
    hint = hints.explain(compile_error_for_gpu(fn, constexpr, block))
    assert hint is not None and says in hint, hint


# --- the CPU tensor on a GPU machine ----------------------------------------------------------------
@pytest.mark.skipif(not ON_A_GPU, reason="needs a GPU")
def test_explains_a_real_cpu_tensor_on_a_gpu():
    on_cpu = torch.randn(1000)
    e = error_of(lambda: copy_kernel[(4,)](on_cpu, OUT, 1000, BLOCK=256))
    assert "device=cu.DEVICE" in hints.explain(e), f"{type(e).__name__}: {e}"


def test_the_cpu_tensor_text_is_what_triton_says():
    """The launcher (C source shipped with Triton, or Python that generates it) holds the text."""
    root = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia")
    sources = [os.path.join(root, f) for f in ("driver.c", "driver.py") if os.path.exists(os.path.join(root, f))]
    if not sources:
        pytest.skip("this Triton ships no NVIDIA launcher source")
    assert any("cannot be accessed from Triton" in open(p).read() for p in sources)


@pytest.mark.parametrize("text", [
    "Pointer argument cannot be accessed from Triton (cpu tensor?)",            # Triton 3.4 and later
    "Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)",     # earlier releases
])
def test_explains_a_cpu_tensor_on_a_gpu(text):
    assert "device=cu.DEVICE" in hints.explain(ValueError(text))


# --- what must not get a hint ------------------------------------------------------------------------
def test_the_course_stub_gets_no_hint():
    try:
        raise NotImplementedError("launch the kernel")
    except NotImplementedError as e:
        assert hints.explain(e) is None


def test_an_ordinary_error_gets_no_hint():
    assert hints.explain(KeyError("x")) is None
    assert hints.explain(ValueError("shapes do not match")) is None


def test_a_check_failure_keeps_the_hint_it_carries():
    from course_utils import check

    def vector_add(x, y):
        out = torch.empty_like(x)
        copy_kernel[(4,)](x, out, x.numel(), BLOCK=300)
        return out
    with pytest.raises(CheckFailed, match="Hint: tl.arange"):
        check.vector_add(vector_add)


# --- a failed check names an exercise hint only for a diagnosis it recognised -------------------------
@triton.jit
def softmax_calling_nothing(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, helper_never_defined(tl.load(x_ptr + offs, mask=offs < N)), mask=offs < N)  # noqa: F821


def online_softmax_with_an_undefined_helper(x, block=1024):
    y = torch.empty_like(x)
    softmax_calling_nothing[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
    return y


def online_softmax_jitting_a_lambda(x, block=8192):
    y = torch.empty_like(x)
    triton.jit(lambda x_ptr, y_ptr: None)[(1,)](x, y)     # Triton finds no `def` in a lambda's source
    return y


def test_an_undefined_helper_is_named_and_sent_to_no_exercise_hint():
    """online_softmax's hints (like labs 3 to 6's) list the key that every crash used to get, so a
    kernel calling an undefined helper was sent to the recipe. Now the GPU compile the check makes first names
    the undefined name (its own key), and no hint of online_softmax addresses that key: none is named."""
    from course_utils import check
    with pytest.raises(CheckFailed, match="helper_never_defined` is called but defined nowhere") as e:
        check.online_softmax(online_softmax_with_an_undefined_helper)
    assert e.value.diagnosis == "undefined-name" and "See hint" not in str(e.value) and "Hint:" not in str(e.value)


def test_a_known_triton_error_is_explained_and_names_no_exercise_hint():
    from course_utils import check
    # Triton 3.9 says so; 3.6 (Colab's, the GPUs') fails on the regular expression that finds no `def`
    with pytest.raises(CheckFailed, match="No function definition found|no attribute 'start'") as e:
        check.online_softmax(online_softmax_jitting_a_lambda)
    assert "Hint: Triton compiles a kernel from its source" in str(e.value)
    assert e.value.diagnosis is None and "See hint" not in str(e.value)


def test_a_recognised_diagnosis_still_names_its_hint():
    from course_utils import check
    from hinted import assert_names_hint

    def online_softmax(x, block=8192):
        raise NotImplementedError("write the kernel")
    with pytest.raises(CheckFailed) as e:
        check.online_softmax(online_softmax)
    assert e.value.diagnosis == "stub"
    assert_names_hint(str(e.value), "online_softmax", 1)


def test_a_graders_crash_row_names_no_hint_and_its_stub_row_does():
    """Lab 5's hint 1 lists the stub and the old catch-all key: its card names it for the stub only."""
    from course_utils import grade
    card = grade.Scorecard("Lab 5 · t", hints="lab5.flash_decoding", performance=False)
    x = torch.randn(2, 100, device=cu.DEVICE)
    def divides_by_zero(t):
        return 1 / 0

    def stub(t):
        raise NotImplementedError("write the kernel")
    for fn in (online_softmax_with_an_undefined_helper, online_softmax_jitting_a_lambda, divides_by_zero, stub):
        with card.criterion(fn.__name__):
            card.call(fn, x)
    *crashes, stub = card.rows
    assert all(r.status == "failed" and "See hint" not in r.diagnosis for r in crashes), card.text()
    assert "raised ZeroDivisionError" in crashes[-1].diagnosis
    assert stub.diagnosis.splitlines()[-1].startswith("See hint 1 ("), stub.diagnosis


# --- IPython prints the hint under the traceback ---------------------------------------------------
@pytest.fixture
def shell():
    from IPython.testing.globalipapp import get_ipython
    ip = get_ipython()
    ip.user_ns.update(copy_kernel=copy_kernel, X=X, OUT=OUT)
    assert hints.install(ip) and hints.install(ip)  # twice is harmless
    yield ip
    hints.uninstall(ip)


def test_ipython_shows_the_traceback_then_the_hint(shell, capsys):
    result = shell.run_cell("copy_kernel[(4,)](X, OUT, 1000, BLOCK=300)")
    out = capsys.readouterr().out
    assert not result.success and "power of 2" in str(result.error_in_exec)
    assert "Traceback" in out or "---" in out          # the usual traceback is still there
    assert out.rstrip().splitlines()[-1].endswith(hints.explain(result.error_in_exec))
    assert "Hint:" in out.rstrip().splitlines()[-1]


def test_ipython_leaves_other_errors_alone(shell, capsys):
    result = shell.run_cell("raise ValueError('not a Triton problem')")
    out = capsys.readouterr().out
    assert not result.success and "not a Triton problem" in out and "Hint:" not in out
    result = shell.run_cell("def f(:\n    pass")
    out = capsys.readouterr().out
    assert not result.success and "SyntaxError" in out and "Hint:" not in out


def test_explain_leaves_a_checks_verdict_alone():
    verdict = CheckFailed("`scaled_add`: `alpha` is declared tl.constexpr ... Declare `alpha` without tl.constexpr",
                          "alpha-constexpr")
    assert hints.explain(verdict) is None


def test_ipython_adds_no_hint_to_a_checks_own_verdict(shell, capsys):
    """A failed check names its cause and its hint; the hook must not add explain()'s generic line, here the
    "declare it NAME: tl.constexpr" that contradicts scaled_add's "declare `alpha` without tl.constexpr"."""
    from course_utils import check
    import kernels as k
    shell.user_ns.update(check=check, scaled_add_alpha_constexpr=k.scaled_add_alpha_constexpr)
    result = shell.run_cell("check.scaled_add(scaled_add_alpha_constexpr)")
    out = capsys.readouterr().out
    assert not result.success and "without tl.constexpr" in out and "See hint 2" in out
    assert "Hint:" not in out and "compile-time constant" not in out
    shell.user_ns["message"] = "`bias_gelu` (3 × 37): BLOCK is not a tl.constexpr.\nSee hint 2 (the grid): ..."
    result = shell.run_cell("raise RuntimeError(message)")
    assert not result.success and "Hint:" not in capsys.readouterr().out


def test_uninstall_restores_ipython(shell, capsys):
    hints.uninstall(shell)
    shell.run_cell("copy_kernel[(4,)](X, OUT, 1000, BLOCK=300)")
    assert "Hint:" not in capsys.readouterr().out
