"""check.ready: what a lesson asks before it times the student's function."""
import pytest
import torch

from course_utils import check


def _cases():
    x = torch.randn(5, 30)
    return [((x,), x * 2), ((x.half(),), (x.half() * 2))]


def test_the_stub_is_not_ready_and_is_not_an_error():
    def double(x):
        raise NotImplementedError("x * 2")
    assert check.ready(double, _cases(), checker="check.double(double)") is False


def test_a_right_function_is_ready_in_every_case():
    assert check.ready(lambda x: x * 2, _cases(), checker="check.double(double)", atol=1e-3, rtol=1e-3) is True


def test_wrong_numbers_stop_with_the_check_to_run():
    def double(x):
        return x * 3
    with pytest.raises(RuntimeError, match=r"double gives wrong numbers in torch.float32: check.double\(double\) says"):
        check.ready(double, _cases(), checker="check.double(double)")


def test_pairs_are_compared_element_by_element():
    x = torch.randn(4, 8)
    cases = [((x,), (x + 1, x))]
    assert check.ready(lambda v: (v + 1, v), cases, checker="c") is True
    with pytest.raises(RuntimeError, match="wrong numbers"):
        check.ready(lambda v: (v + 1, v + 1), cases, checker="c")
    with pytest.raises(RuntimeError, match="wrong numbers"):
        check.ready(lambda v: v + 1, cases, checker="c")   # one output where two belong
