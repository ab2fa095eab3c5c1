from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from core.types import User
from knowledge.documents.upload import document_upload
from knowledge.models import Space
from knowledge.services import space_create, space_member_set

DEMO_SPACE = "Demo"
DEMO_CORPUS = Path(__file__).resolve().parents[3] / "knowledge" / "demo"


class Command(BaseCommand):
    help = "Load koinon's demo data: an admin, a reader and the Demo space."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="skip when spaces exist")

    @transaction.atomic
    def handle(self, *args: object, if_empty: bool, **options: object) -> None:
        if if_empty and Space.objects.exists():
            self.stdout.write("demo data: skipped, the database already has spaces")
            return
        users = get_user_model().objects
        admin = users.filter(username="admin").first()
        if admin is None:
            # Local demo only: the password is printed and meant to be changed.
            admin = users.create_superuser("admin", "admin@example.invalid", "koinon-demo")
        if not users.filter(username="reader").exists():
            users.create_user("reader", "reader@example.invalid", "koinon-demo")
        space = Space.objects.filter(name=DEMO_SPACE).first() or space_create(
            name=DEMO_SPACE, description="Demo corpus shipped with koinon.", created_by=admin
        )
        space_member_set(space=space, username="reader", role="reader")
        self._load_documents(space=space, admin=admin)
        self.stdout.write(
            "demo data: users admin and reader (password 'koinon-demo'), space 'Demo'"
        )

    def _load_documents(self, *, space: Space, admin: User) -> None:
        # Written for koinon; extraction runs in the worker once the transaction commits.
        for path in sorted(DEMO_CORPUS.iterdir()):
            document_upload(user=admin, filename=path.name, data=path.read_bytes(), space=space)
