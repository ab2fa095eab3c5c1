import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from conversations.services import ExportVerification, export_verify


class Command(BaseCommand):
    help = (
        "Recompute every hash of a conversation export against the stored releases and "
        "its answer log part against the log's key, and report each mismatch (exit status "
        "1 if there is any); the summary states only what was verified."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the JSON of GET /v1/conversations/<id>/export")

    def handle(self, *args: object, file: str, **options: object) -> None:
        try:
            export = json.loads(Path(file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            export = None
        try:
            verified = export_verify(export)
        except RecursionError:
            verified = ExportVerification(
                problems=["not a koinon conversation export: nested too deeply"]
            )
        if verified.problems:
            for problem in verified.problems:
                self.stderr.write(problem)
            sys.exit(1)
        self.stdout.write(summary(verified))


def summary(verified: ExportVerification) -> str:
    """One line of verified figures only: the tree size is the signed checkpoint's and the
    count is of this export's releases whose proofs led to its root, never the file's own
    `tree_size` or number of proofs; a logged release no proof covered is said."""
    sealed, log = verified.sealed, verified.log
    line = (
        f"verified: {sealed} sealed answer{'s' if sealed != 1 else ''}, "
        "every hash matches its stored release"
    )
    if log.tree_size is not None:
        line += f"; {log.proven} in the answer log's checkpoint of size {log.tree_size}"
    if log.unproven:
        are = "is" if log.unproven == 1 else "are"
        line += "; not checked against the answer log: " + (
            f"{log.unproven} of its releases {are} logged after that checkpoint"
            if log.tree_size is not None
            else f"the export carries no log part, though {log.unproven} of its releases "
            f"{are} logged"
        )
    return line
