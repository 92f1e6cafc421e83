"""check.roofline_time accepts the roofline bound and rejects the stub and the realistic mistakes."""
import pytest

from course_utils.check import CheckFailed
from course_utils.check.roofline import roofline_time as check_roofline_time
from hinted import assert_names_hint


def right(flops, nbytes, copy_gbps, matmul_tflops):
    return max(nbytes / (copy_gbps * 1e6), flops / (matmul_tflops * 1e9))


def test_the_roofline_bound_passes():
    assert "roofline_time" in repr(check_roofline_time(right))


def stub(flops, nbytes, copy_gbps, matmul_tflops):
    raise NotImplementedError("max of the memory time and the compute time")


WRONG = {
    "summed": (lambda f, b, g, t: b / (g * 1e6) + f / (t * 1e9), "the sum"),
    "smaller": (lambda f, b, g, t: min(b / (g * 1e6), f / (t * 1e9)), "smaller"),
    "memory only": (lambda f, b, g, t: b / (g * 1e6), "ignores the compute term"),
    "compute only": (lambda f, b, g, t: f / (t * 1e9), "ignores the memory term"),
    "GB/s as bytes/s": (lambda f, b, g, t: max(b / (g * 1e9), f / (t * 1e9)), "off by 1000"),
    "seconds": (lambda f, b, g, t: right(f, b, g, t) / 1e3, "off by 1000"),
    "TFLOP/s slip": (lambda f, b, g, t: max(b / (g * 1e6), f / (t * 1e6)), "compute term is off by 1000"),
    "seconds, summed": (lambda f, b, g, t: (b / (g * 1e6) + f / (t * 1e9)) / 1e3,
                        "memory term is off by 1000 .too small.; the compute term is off by 1000 .*combined by sum"),
    "no conversion": (lambda f, b, g, t: max(b / g, f / t), "memory term is off by 1000000 .too large.; the compute "
                      "term is off by 1000000000"),
    "intensity": (lambda f, b, g, t: f / b,
                  r"raised ZeroDivisionError.*\nThat was roofline_time\(5e\+11, 0, .*no bytes"),
    "GiB for GB": (lambda f, b, g, t: max(b / (g * 2**30) * 1e3, f / (t * 1e9)),
                   r"memory term is off by a factor 1.07 \(too small\) \(a binary prefix: 1 GB is 1e9 bytes"),
    "no return": (lambda f, b, g, t: None, "None"),
    "a string": (lambda f, b, g, t: "1 ms", "one number"),
    "constant": (lambda f, b, g, t: 1.0, "expected"),
    "stub": (stub, "stub"),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_mistakes_are_rejected_with_a_diagnosis(name):
    fn, words = WRONG[name]
    with pytest.raises(CheckFailed, match=words):
        check_roofline_time(fn)
    assert issubclass(CheckFailed, AssertionError)


# --- each failure names the hint of lesson 00 that addresses its diagnosis ---------------------------
@pytest.mark.parametrize("name, diagnosis, hint", [
    ("stub", "stub", 1),
    ("summed", "sum", 1),
    ("smaller", "min", 1),
    ("memory only", "one-term", 1),
    ("GB/s as bytes/s", "units", 2),
    ("TFLOP/s slip", "units", 2),
    ("seconds, summed", "units", 2),
    ("no conversion", "units", 2),
    ("GiB for GB", "units", 2),
])
def test_failures_name_their_hint(name, diagnosis, hint):
    from course_utils import check
    with pytest.raises(CheckFailed) as e:
        check.roofline_time(WRONG[name][0])
    assert e.value.diagnosis == diagnosis
    assert_names_hint(e.value, "roofline_time", hint)
