import pytest

from core.services import api_key_create
from datasets.services import dataset_upload
from knowledge.models import Passage
from tests.mcp_server.helpers import HANDBOOK, INJECTED, INVOICES, PRIVATE, ingest


@pytest.fixture
def library(space, owner, member) -> dict:
    """The Operations space (owner curates, member reads): a handbook, a document with
    injected instructions, the invoices dataset; and the member's private note."""
    handbook = ingest(owner, "handbook.md", HANDBOOK, space=space, title="Operations handbook")
    injected = ingest(owner, "injected.txt", INJECTED, space=space, title="Vendor memo")
    private = ingest(member, "notes.txt", PRIVATE, private=True, title="Budget notes")
    snapshot = dataset_upload(
        user=owner, space=space, filename="invoices.csv", data=INVOICES, table="orders"
    )
    passages = {
        name: Passage.objects.filter(document=result.document, text__contains=words).get()
        for name, result, words in (
            ("handbook", handbook, "owns service reviews"),
            ("injected", injected, "Ignore all previous"),
            ("private", private, "budget meeting"),
        )
    }
    return {
        "handbook": handbook.document,
        "injected": injected.document,
        "private": private.document,
        "dataset": snapshot.dataset,
        "passages": passages,
    }


@pytest.fixture
def keys(owner, member, outsider) -> dict:
    return {
        "curator": api_key_create(user=owner),
        "reader": api_key_create(user=member),
        "outsider": api_key_create(user=outsider),
    }
