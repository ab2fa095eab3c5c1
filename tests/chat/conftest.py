# The mixed-sources corpus of the answer tests (two documents and the invoices dataset).
from tests.answers.conftest import library  # noqa: F401
