import pytest

from core.services import api_key_create
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from tests.clients.helpers import TEXT


@pytest.fixture
def corpus(space, owner):
    """One extracted document in the space: what the client tests ask about."""
    result = document_upload(user=owner, filename="ops.txt", data=TEXT.encode(), space=space)
    revision_extract(revision_id=result.revision.pk)
    return result


@pytest.fixture
def reader_key(member) -> str:
    return api_key_create(user=member).secret
