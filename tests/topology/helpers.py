"""The topology tests' setup: people, a space and its handbook, made direct on the primary."""

import json

from tools.topology.harness import Topology

SEED = """
import json
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
    output = topology.shell(SEED.format(prefix=prefix))
    seeded = json.loads(output.strip().splitlines()[-1])
    topology.replica_wait()
    return seeded


def member_remove(topology: Topology, *, space: int, username: str) -> None:
    topology.shell(
        "from knowledge.models import Space\n"
        "from knowledge.services import space_member_remove\n"
        f"space_member_remove(space=Space.objects.get(pk={space}), username={username!r})\n"
    )


def headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
