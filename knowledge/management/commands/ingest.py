import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApiError
from core.selectors import user_get_by_username
from knowledge.documents.upload import document_change_check, document_upload
from knowledge.models import ExtractionRole, ExtractionStatus
from knowledge.selectors import (
    document_get_for_user,
    revision_extractions,
    space_find,
    spaces_all,
)

UNFINISHED = {ExtractionStatus.PENDING, ExtractionStatus.RUNNING}


class Command(BaseCommand):
    help = (
        "Upload files into a space; extraction runs in the Celery worker. With --wait, wait "
        "for every file and print its outcome (and the reason of a failure)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--space", required=True, help="space name or id")
        parser.add_argument("--user", default="admin", help="uploader (default: admin)")
        parser.add_argument(
            "--document", type=int, help="upload one file as a new revision of this document"
        )
        parser.add_argument("--wait", action="store_true", help="wait for the extractions")
        parser.add_argument(
            "--timeout", type=float, default=300.0, help="seconds --wait waits in all"
        )

    def handle(
        self,
        *args: object,
        paths: list[Path],
        space: str,
        user: str,
        wait: bool,
        timeout: float,
        document: int | None = None,
        **options: object,
    ) -> None:
        target = space_find(name_or_id=space)
        if target is None:
            names = ", ".join(repr(s.name) for s in spaces_all()[:20]) or "none yet"
            raise CommandError(
                f"No space is named or numbered {space!r}. Spaces: {names}. "
                "Create one with `manage.py space create NAME`."
            )
        uploader = user_get_by_username(username=user)
        if uploader is None:
            raise CommandError(f"No active user is named {user!r}.")
        revised = None
        try:  # the same role check as every other way in, before any file is read
            if document is not None:
                revised = document_get_for_user(user=uploader, document_id=document)
            document_change_check(user=uploader, space=target, document=revised)
        except ApiError as error:
            raise CommandError(f"{user} may not add to {target.name!r}: {error.detail}") from None
        files = [
            p for path in paths for p in (sorted(path.rglob("*")) if path.is_dir() else [path])
        ]
        if revised is not None and len(files) != 1:
            raise CommandError("--document takes exactly one file (its new revision).")
        failures = 0
        uploaded: list[tuple[str, int]] = []
        for path in files:
            if not path.is_file():
                continue
            try:
                data = path.read_bytes()
                result = document_upload(
                    user=uploader, filename=path.name, data=data, space=target, document=revised
                )
            except ApiError as error:
                failures += 1
                self.stderr.write(f"{path.name}: {error.error_code}: {error.detail}")
                continue
            state = "queued" if result.created else "unchanged"
            self.stdout.write(
                f"{path.name}: document {result.document.pk} "
                f"revision {result.revision.number} {state}"
            )
            uploaded.append((path.name, result.revision.pk))
        if wait:
            failures += self._wait(uploaded, deadline=time.monotonic() + timeout)
        if failures:
            raise CommandError(f"{failures} file(s) were refused or not admitted")

    def _wait(self, uploaded: list[tuple[str, int]], *, deadline: float) -> int:
        """Print one line per file once its extraction is finished; the count of failures."""
        failures = 0
        waiting = list(uploaded)
        while waiting:
            still = []
            for name, revision_id in waiting:
                extractions = revision_extractions(revision_id=revision_id)
                if not extractions or any(e.status in UNFINISHED for e in extractions):
                    still.append((name, revision_id))
                    continue
                failures += self._report(name, extractions)
            waiting = still
            if waiting and time.monotonic() > deadline:
                for name, _ in waiting:
                    failures += 1
                    self.stderr.write(f"{name}: still extracting (is the worker running?)")
                break
            if waiting:
                time.sleep(0.5)
        return failures

    def _report(self, name: str, extractions: list) -> int:
        serving = next((e for e in extractions if e.serves_passages), None)
        if serving is not None:
            passages = serving.passages.count()
            self.stdout.write(f"{name}: admitted ({passages} passages, {serving.extractor})")
            warning = serving.revision.text_warning
            if warning:
                self.stderr.write(f"{name}: warning: {warning}")
            return 0
        primary = next((e for e in extractions if e.role == ExtractionRole.PRIMARY), None)
        failed = primary or extractions[0]
        self.stderr.write(f"{name}: failed: {failed.error_code}: {failed.error_message}")
        return 1
