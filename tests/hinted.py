"""One assertion for every test of a failure that points to a hint (checkers and graders alike)."""
import re


def assert_names_hint(text: str, exercise: str, n: int) -> None:
    """The failure's last line is the pointer course_utils.hints.pointer writes, to hint n of `exercise`."""
    last = str(text).strip().splitlines()[-1]
    pattern = rf"See hint {n} \(.+\): its button under the exercise, or cu\.hints\.show\('{re.escape(exercise)}', {n}\)\."
    assert re.fullmatch(pattern, last), f"expected a pointer to hint {n} of {exercise}, got:\n{text}"
