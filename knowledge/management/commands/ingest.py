from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApiError
from knowledge.documents import document_upload
from knowledge.selectors import space_find


class Command(BaseCommand):
    help = "Upload files into a space; extraction runs in the Celery worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--space", required=True, help="space name or id")
        parser.add_argument("--user", default="admin", help="uploader (default: admin)")

    def handle(self, *args, paths: list[Path], space: str, user: str, **options) -> None:
        target = space_find(name_or_id=space)
        if target is None:
            raise CommandError(f"no space {space!r}")
        uploader = get_user_model().objects.filter(username=user).first()
        if uploader is None:
            raise CommandError(f"no user {user!r}")
        files = [
            p for path in paths for p in (sorted(path.rglob("*")) if path.is_dir() else [path])
        ]
        failures = 0
        for path in files:
            if not path.is_file():
                continue
            try:
                result = document_upload(
                    user=uploader, filename=path.name, data=path.read_bytes(), space=target
                )
            except ApiError as error:
                failures += 1
                self.stderr.write(f"{path.name}: {error.error_code}: {error.detail}")
                continue
            state = "queued" if result.created else "unchanged"
            self.stdout.write(f"{path.name}: document {result.document.pk} "
                              f"revision {result.revision.number} {state}")  # fmt: skip
        if failures:
            raise CommandError(f"{failures} file(s) were refused")
