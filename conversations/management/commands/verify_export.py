import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from conversations.services import export_verify


class Command(BaseCommand):
    help = (
        "Recompute every hash of a conversation export against the stored releases and "
        "report each mismatch (exit status 1 if there is any)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the JSON of GET /v1/conversations/<id>/export")

    def handle(self, *args: object, file: str, **options: object) -> None:
        try:
            export = json.loads(Path(file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            export = None
        try:
            problems = export_verify(export)
        except RecursionError:
            problems = ["not a koinon conversation export: nested too deeply"]
        if problems:
            for problem in problems:
                self.stderr.write(problem)
            sys.exit(1)
        sealed = sum(1 for m in export["messages"] if m.get("state") == "sealed")
        log = export.get("log")
        logged = (
            f"; {len(log['proofs'])} in the answer log's checkpoint of size {log['tree_size']}"
            if isinstance(log, dict)
            else ""
        )
        self.stdout.write(
            f"verified: {sealed} sealed answer{'s' if sealed != 1 else ''}, "
            f"every hash matches its stored release{logged}"
        )
