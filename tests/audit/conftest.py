import pytest

from tests.answers.helpers import MIXED_QUESTION, ask


@pytest.fixture
def published(library, member) -> dict:
    """One published answer of the mixed-sources library."""
    return ask(member, MIXED_QUESTION)
