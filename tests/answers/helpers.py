"""The answer tests' corpus and how they ask (fixtures stay in conftest modules)."""

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

MIXED_QUESTION = (
    "Who owns service reviews, what currency is the invoice dataset in, "
    "and what is the total amount of the invoices?"
)


def ingest(user, space, filename: str, text: str, **fields):
    result = document_upload(
        user=user, filename=filename, data=text.encode(), space=space, **fields
    )
    revision_extract(revision_id=result.revision.pk)
    return result


def ask(user, query: str, *, provider=None, api_key=None, **fields) -> dict:
    from answers.pipeline.lifecycle import answer_create
    from answers.pipeline.request import answer_request_parse

    request = answer_request_parse({"query": query, **fields})
    return answer_create(user=user, request=request, provider=provider, api_key=api_key)


def whole_passage(candidates) -> dict:
    """A scripted selection: the first quote candidate, whole."""
    quote = next(c for c in candidates if c.kind == "quote")
    return {"facts": [{"fact_id": quote.fact_id, "start": 0, "end": len(quote.text)}]}
