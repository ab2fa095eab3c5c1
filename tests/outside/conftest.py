import pytest

from tests.outside.client_servers import App, LoopbackServer


@pytest.fixture
def serve():
    """Start an app on a loopback port for this test; stopped (stalls released) after it."""
    servers: list[LoopbackServer] = []

    def start(app: App) -> LoopbackServer:
        server = LoopbackServer(app).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
