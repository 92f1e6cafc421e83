# Importing course_utils first puts Triton in interpreter mode on a machine without a GPU,
# before any test module defines a kernel.
import course_utils  # noqa: F401
