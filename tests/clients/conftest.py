import hashlib

import pytest
from koinon_client import Client

from audit.checkpoint import Checkpoint, checkpoint_sign
from audit.log import log_integrate
from audit.merkle import leaf_hash
from audit.models import LogCheckpoint
from core.services import api_key_create
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from tests.audit.helpers import ORIGIN, as_owner, more_releases
from tests.clients.helpers import QUESTION, TEXT


@pytest.fixture
def corpus(space, owner):
    """One extracted document in the space: what the client tests ask about."""
    result = document_upload(user=owner, filename="ops.txt", data=TEXT.encode(), space=space)
    revision_extract(revision_id=result.revision.pk)
    return result


@pytest.fixture
def reader_key(member) -> str:
    return api_key_create(user=member).secret


@pytest.fixture
def log_scenario(live_server_url, library, member, log_key) -> dict[str, str]:
    """The answer log as the TypeScript and Go suites check it (issue 51), made as
    tests/clients/test_python_client_log.py makes it: two of the reader's answers and three
    further receipts integrated under two signed checkpoints; the second answer then
    rewritten by the database owner (the sealed text and the receipt's text hash, row and
    sealed body alike, so the receipt alone still agrees); and a fork, a checkpoint of the
    first one's size with another root, signed with the log's key. Named for the suites in
    KOINON_LOG_* variables."""
    with Client(live_server_url, api_key_create(user=member).secret) as client:
        genuine, rewritten = (client.answer.create(QUESTION) for _ in range(2))
    assert genuine.verified and rewritten.verified
    log_integrate()
    more_releases(3)
    log_integrate()
    kept = LogCheckpoint.objects.order_by("size").first()
    assert kept is not None and LogCheckpoint.objects.count() == 2
    forged_text = "Nobody owns service reviews."
    forged_hash = hashlib.sha256(forged_text.encode()).hexdigest()
    as_owner(
        (
            "UPDATE audit_outputrelease SET text_sha256 = %s WHERE id = %s",
            [forged_hash, rewritten.release.id],
        ),
        (
            "UPDATE answers_answerrun SET response = jsonb_set(jsonb_set(response, "
            "'{answer,text}', to_jsonb(%s::text)), '{release,text_sha256}', "
            "to_jsonb(%s::text)) WHERE id = %s",
            [forged_text, forged_hash, rewritten.run_id],
        ),
    )
    fork = checkpoint_sign(
        Checkpoint(origin=ORIGIN, size=kept.size, root=leaf_hash(b"another history")),
        signer=log_key,
    )
    return {
        "KOINON_LOG_VERIFIER_KEY": log_key.verifier().key_string(),
        "KOINON_LOG_RUN": genuine.run_id,
        "KOINON_LOG_REWRITTEN_RUN": rewritten.run_id,
        "KOINON_LOG_KEPT_CHECKPOINT": kept.note,
        "KOINON_LOG_FORKED_CHECKPOINT": fork,
    }
