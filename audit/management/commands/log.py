from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from audit.log import LogKeyUnavailable
from audit.log_verify import log_verify


class Command(BaseCommand):
    help = "The answer log: `verify` recomputes it and checks every checkpoint."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["verify"])
        parser.add_argument(
            "--checkpoint",
            action="append",
            default=[],
            metavar="FILE",
            help="a signed checkpoint kept outside the database (repeatable)",
        )

    def handle(self, *args: object, **options: Any) -> None:  # noqa: ANN401 - argparse values
        try:
            supplied = [Path(name).read_text(encoding="utf-8") for name in options["checkpoint"]]
        except OSError as error:
            raise CommandError(f"a checkpoint file cannot be read: {error.strerror}") from None
        try:
            report = log_verify(supplied=supplied)
        except LogKeyUnavailable as error:
            raise CommandError(str(error)) from None
        for problem in report.problems:
            self.stdout.write(f"PROBLEM {problem}")
        self.stdout.write(
            f"{report.entries} entries, {report.checkpoints} checkpoints checked, "
            f"{report.pending} releases not yet integrated, {len(report.problems)} problems"
        )
        if report.problems:
            raise CommandError("the answer log does not verify")
