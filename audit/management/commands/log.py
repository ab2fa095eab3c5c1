from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from audit.log import LogKeyUnavailable
from audit.log_verify import log_verify
from audit.log_witness import log_witness


class Command(BaseCommand):
    help = (
        "The answer log: `verify` recomputes it and checks every checkpoint; `witness DIR` "
        "appends each new checkpoint consistent with the newest one kept in DIR."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["verify", "witness"])
        parser.add_argument(
            "directory", nargs="?", metavar="DIR", help="witness: where checkpoints are kept"
        )
        parser.add_argument(
            "--checkpoint",
            action="append",
            default=[],
            metavar="FILE",
            help="a signed checkpoint kept outside the database (repeatable)",
        )

    def handle(self, *args: object, **options: Any) -> None:  # noqa: ANN401 - argparse values
        if options["action"] == "witness":
            self.witness(options["directory"])
            return
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

    def witness(self, directory: str | None) -> None:
        if not directory:
            raise CommandError("witness needs the directory to keep checkpoints in")
        try:
            report = log_witness(directory=Path(directory))
        except LogKeyUnavailable as error:
            raise CommandError(str(error)) from None
        except OSError as error:
            raise CommandError(f"the witness directory cannot be used: {error.strerror}") from None
        for problem in report.problems:
            self.stdout.write(f"PROBLEM {problem}")
        newest = "none" if report.newest is None else f"size {report.newest}"
        self.stdout.write(
            f"{len(report.written)} new checkpoints kept, the newest kept: {newest}, "
            f"{len(report.problems)} problems"
        )
        if report.problems:
            raise CommandError("the answer log is not consistent with the kept checkpoints")
