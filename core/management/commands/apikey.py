from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.selectors import api_keys_of
from core.services import ApiKeyAmbiguous, ApiKeyNotFound, api_key_create, api_key_revoke
from core.types import User


class Command(BaseCommand):
    help = "Create, revoke or list API keys. `create` prints the key alone on its last line."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="issue a key")
        create.add_argument("--user", required=True)
        create.add_argument("--name", default="")
        revoke = actions.add_parser("revoke", help="revoke a key by its visible prefix")
        revoke.add_argument("prefix")
        listing = actions.add_parser("list", help="list a user's keys")
        listing.add_argument("--user", required=True)

    def handle(self, *args: object, action: str, **options: object) -> None:
        getattr(self, f"_{action}")(**options)

    def _user(self, username: str) -> User:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        return user

    def _create(self, *, user: str, name: str, **options: object) -> None:
        issued = api_key_create(user=self._user(user), name=name)
        self.stdout.write(f"API key {issued.api_key.prefix}… for {user} (shown once):")
        self.stdout.write(issued.secret)

    def _revoke(self, *, prefix: str, **options: object) -> None:
        try:
            api_key = api_key_revoke(prefix=prefix)
        except ApiKeyNotFound:
            raise CommandError(f"no API key with prefix {prefix!r}") from None
        except ApiKeyAmbiguous:
            raise CommandError(
                f"several API keys share prefix {prefix!r}; give more of the key"
            ) from None
        self.stdout.write(
            f"revoked {api_key.prefix}… of {api_key.user} "
            f"at {api_key.revoked_at:%Y-%m-%d %H:%M:%S}Z"
        )

    def _list(self, *, user: str, **options: object) -> None:
        for api_key in api_keys_of(user=self._user(user)):
            state = f"revoked {api_key.revoked_at:%Y-%m-%d}" if api_key.revoked_at else "active"
            used = f"{api_key.last_used_at:%Y-%m-%d %H:%M}" if api_key.last_used_at else "never"
            self.stdout.write(
                f"{api_key.prefix}…\t{api_key.name or '-'}\tcreated {api_key.created_at:%Y-%m-%d}"
                f"\tlast used {used}\t{state}"
            )
