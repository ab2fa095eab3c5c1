import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.selectors import user_get_by_username
from mcp_server.server import stdio_serve


class Command(BaseCommand):
    help = (
        "Serve koinon's MCP tools on stdin/stdout as one user (for desktop MCP clients that "
        "start their servers themselves). Over HTTP, use /mcp with an API key instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="the user every call runs as")

    def handle(self, *args: object, user: str, **options: object) -> None:
        account = user_get_by_username(username=user)
        if account is None:
            raise CommandError(f"no active user {user!r}")
        # stdout carries the protocol: nothing else may be written to it.
        anyio.run(lambda: stdio_serve(user_id=account.pk))
