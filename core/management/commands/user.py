import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApiError
from core.services import user_create


class Command(BaseCommand):
    help = "Create users. Staff may open admin; what anyone may read comes from space roles."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="create an active user")
        create.add_argument("username")
        create.add_argument("--email", default="")
        create.add_argument("--staff", action="store_true", help="may open Django admin")
        create.add_argument("--superuser", action="store_true", help="every permission")
        create.add_argument(
            "--password-stdin",
            action="store_true",
            help="read the password from standard input (else: API keys only)",
        )

    def handle(self, *args: object, action: str, **options: object) -> None:
        getattr(self, f"_{action}")(**options)

    def _create(
        self,
        *,
        username: str,
        email: str,
        staff: bool,
        superuser: bool,
        password_stdin: bool,
        **options: object,
    ) -> None:
        password = sys.stdin.readline().rstrip("\n") if password_stdin else None
        try:
            user = user_create(
                username=username,
                email=email,
                password=password,
                staff=staff,
                superuser=superuser,
            )
        except ApiError as error:
            raise CommandError(f"{error.error_code}: {error.detail}") from None
        kind = "superuser" if user.is_superuser else "staff user" if user.is_staff else "user"
        login = "password set" if password is not None else "no password: use API keys"
        self.stdout.write(f"created {kind} {user.get_username()} ({login})")
