from argparse import ArgumentParser
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from audit.log import LogKeyUnavailable, log_key_ensure
from audit.log_verify import log_verify
from audit.log_witness import log_witness
from audit.signed_note import KeyMalformed

# The origin of a key made for local use; a deployment names its own log.
LOCAL_ORIGIN = "koinon.localhost/answers"


class Command(BaseCommand):
    help = (
        "The answer log: `verify` recomputes it and checks every checkpoint; `witness DIR` "
        "appends each new checkpoint consistent with the newest one kept in DIR; `key FILE` "
        "creates a signing key in FILE unless one is there, and prints its public key."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["verify", "witness", "key"])
        parser.add_argument(
            "directory",
            nargs="?",
            metavar="DIR|FILE",
            help="witness: where checkpoints are kept; key: the key file",
        )
        parser.add_argument(
            "--origin", default=LOCAL_ORIGIN, help="key: the log's name, in every checkpoint"
        )
        parser.add_argument(
            "--checkpoint",
            "--checkpoints",
            dest="checkpoint",
            action="append",
            default=[],
            metavar="FILE",
            help="a signed checkpoint kept outside the database (repeatable)",
        )

    def handle(
        self,
        *args: object,
        action: str,
        directory: str | None,
        origin: str,
        checkpoint: list[str],
        **options: object,
    ) -> None:
        if action == "witness":
            self.witness(directory)
            return
        if action == "key":
            self.key(directory, origin=origin)
            return
        try:
            supplied = [Path(name).read_text(encoding="utf-8") for name in checkpoint]
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
            f"{report.subtrees} stored subtree hashes checked "
            f"({report.subtrees_missing} not stored yet), "
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

    def key(self, name: str | None, *, origin: str) -> None:
        """Never prints the private key: only the public one, which readers verify with."""
        if not name:
            raise CommandError("key needs the file to keep the signing key in")
        try:
            signer, created = log_key_ensure(Path(name), origin=origin)
        except (LogKeyUnavailable, KeyMalformed) as error:
            raise CommandError(str(error)) from None
        except OSError as error:
            raise CommandError(f"the key file cannot be written: {error.strerror}") from None
        self.stdout.write(
            f"{'created' if created else 'kept'} the answer log's signing key; "
            f"its public key: {signer.verifier().key_string()}"
        )
