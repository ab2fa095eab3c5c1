from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApiError
from core.selectors import user_get_by_username
from knowledge.selectors import ROLE_CURATOR, ROLE_READER, space_find, space_members, spaces_all
from knowledge.services import space_create, space_member_remove, space_member_set


class Command(BaseCommand):
    help = "Create spaces and give people roles in them (reader, curator)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="create a space with its first curator")
        create.add_argument("name")
        create.add_argument("--curator", required=True, help="username of the first curator")
        create.add_argument("--description", default="")
        member = actions.add_parser("member", help="set (or --remove) a user's role")
        member.add_argument("space", help="space name or id")
        member.add_argument("username")
        member.add_argument("--role", choices=[ROLE_READER, ROLE_CURATOR])
        member.add_argument("--remove", action="store_true", help="take every role away")
        actions.add_parser("list", help="every space with its members")

    def handle(self, *args: object, action: str, **options: object) -> None:
        try:
            getattr(self, f"_{action}")(**options)
        except ApiError as error:
            raise CommandError(f"{error.error_code}: {error.detail}") from None

    def _create(self, *, name: str, curator: str, description: str, **options: object) -> None:
        user = user_get_by_username(username=curator)
        if user is None:
            raise CommandError(f"no active user {curator!r}")
        space = space_create(name=name, description=description, created_by=user)
        self.stdout.write(f"created space {space.name} (id {space.pk}); curator {curator}")

    def _member(
        self, *, space: str, username: str, role: str | None, remove: bool, **options: object
    ) -> None:
        target = space_find(name_or_id=space)
        if target is None:
            raise CommandError(f"no space {space!r}")
        if remove == (role is not None):
            raise CommandError("give either --role reader|curator or --remove")
        if remove:
            space_member_remove(space=target, username=username)
            self.stdout.write(f"{username} has no role in {target.name} any more")
        elif role is not None:  # one of the two, as checked above
            space_member_set(space=target, username=username, role=role)
            self.stdout.write(f"{username} is {role} of {target.name}")

    def _list(self, **options: object) -> None:
        for space in spaces_all():
            members = ", ".join(
                f"{m['username']} ({m['role']})" for m in space_members(space=space)
            )
            self.stdout.write(f"{space.pk}\t{space.name}\t{members or '-'}")
