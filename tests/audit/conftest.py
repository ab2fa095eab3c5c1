# The answers suite's corpus, shared with the audit tests.
from tests.answers.conftest import library  # noqa: F401
