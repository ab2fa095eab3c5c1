import os
from collections.abc import Callable

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koinon.settings")

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from mcp_server.server import McpHttpApp  # noqa: E402

mcp_app = McpHttpApp()


async def http_app(scope: dict, receive: Callable, send: Callable) -> None:
    """`/mcp` is the MCP server (Streamable HTTP); every other path is Django's."""
    path = scope.get("path", "")
    if path == "/mcp" or path.startswith("/mcp/"):
        await mcp_app(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter({"http": http_app})
