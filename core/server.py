"""Daphne, refusing request bodies larger than KOINON_REQUEST_MAX_BYTES before reading them.

Twisted reads a whole request body (to a temporary file) before Daphne hands the
request to Django, so no view or middleware can refuse an oversized upload in time.
This entry point gives Daphne's HTTP factory a request class that answers 413 as
soon as the headers declare too much (or a chunked body grows past the limit) and
closes the connection. Run it like daphne: `python -m core.server -b HOST -p PORT
koinon.asgi:application`.
"""

import json
import os

from daphne import server as daphne_server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings


def _limit() -> int:
    return settings.KOINON_REQUEST_MAX_BYTES


class _Discard:
    """Where the body of a refused request goes."""

    def write(self, data: bytes) -> None:
        pass

    def seek(self, *args: object) -> int:
        return 0

    def read(self, *args: object) -> bytes:
        return b""

    def close(self) -> None:
        pass

    closed = False


class BoundedWebRequest(WebRequest):
    """Twisted names its hooks in camelCase; these override them."""

    refused = False
    received = 0

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > _limit():
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return
        self.received += len(data)
        if self.received > _limit():
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self.refused:
            super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self.refused = True
        self.content = _Discard()
        body = json.dumps(
            {
                "error": {
                    "code": "too_large",
                    "message": f"The request body is larger than {_limit()} bytes.",
                    "fields": {},
                }
            }
        ).encode()
        self.channel.transport.write(
            b"HTTP/1.1 413 Request Entity Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n"
            b"Connection: close\r\n\r\n" + body
        )
        self.channel.transport.loseConnection()


class BoundedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr: object) -> object:
        protocol = super().buildProtocol(addr)
        if protocol is not None:
            protocol.requestFactory = BoundedWebRequest
        return protocol


# Connections a web process keeps (koinon.settings): KOINON_DB_POOL=0 turns the pool off.
WEB_POOL_SIZE = 32


def main() -> None:
    os.environ.setdefault("KOINON_DB_POOL", str(WEB_POOL_SIZE))  # before Django's settings
    # daphne.server.Server builds its factory from this module-level name.
    daphne_server.HTTPFactory = BoundedHTTPFactory
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
