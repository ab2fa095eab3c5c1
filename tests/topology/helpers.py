"""The topology tests' setup: people, a space and its handbook, made direct on the primary."""

import json
import time

from tools.topology.harness import Topology

SEED = """
import json
import time
from core.services import api_key_create
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import OPERATIONS, ingest
from tests.helpers import make_user

staff = make_user("{prefix}-staff", staff=True)
owner, member = make_user("{prefix}-owner"), make_user("{prefix}-member")
space = space_create(name="{prefix} operations", created_by=staff)
space_member_set(space=space, username=owner.username, role="curator")
space_member_set(space=space, username=member.username, role="reader")
document = ingest(owner, space, "operations.md", OPERATIONS).document
print(json.dumps({{
    "space": space.pk,
    "document": document.pk,
    "member": member.username,
    "owner_key": api_key_create(user=owner).secret,
    "member_key": api_key_create(user=member).secret,
}}))
"""

QUESTION = "Who owns service reviews?"


def seed(topology: Topology, prefix: str) -> dict:
    """A curator and a reader of a new space holding the operations handbook (extracted),
    with an API key each; waits until the replica has it too."""
    seeded = seed_on_primary(topology, prefix)
    topology.replica_wait()
    return seeded


def seed_on_primary(topology: Topology, prefix: str) -> dict:
    """`seed` without waiting for the replica (one whose replay is paused)."""
    output = topology.shell(SEED.format(prefix=prefix))
    seeded = json.loads(output.strip().splitlines()[-1])
    embedded_wait(topology, seeded["document"])
    return seeded


def embedded_wait(topology: Topology, document: int, timeout: float = 120) -> None:
    """Until the workers have embedded every passage of the document (the vector channel
    finds it then; before, an answer is `partial`)."""
    deadline = time.monotonic() + timeout
    while True:
        ((passages, embedded),) = topology.primary_sql(
            "SELECT count(*), count(*) FILTER (WHERE embedding_status = 'embedded') "
            "FROM knowledge_passage WHERE document_id = %s AND is_current",
            [document],
        )
        if passages and embedded == passages:
            return
        assert time.monotonic() < deadline, "the passages were not embedded in time"
        time.sleep(0.25)


def member_remove(topology: Topology, *, space: int, username: str) -> None:
    topology.shell(
        "from knowledge.models import Space\n"
        "from knowledge.services import space_member_remove\n"
        f"space_member_remove(space=Space.objects.get(pk={space}), username={username!r})\n"
    )


def headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
