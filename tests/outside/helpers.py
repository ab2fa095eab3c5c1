"""Helpers for the outside channels' tests: a resolver that never asks DNS, and a record of
every connection attempted."""

import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from unittest import mock


class Resolver:
    """Answers every name with the same addresses and records what it was asked."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self.addresses = list(addresses)
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.addresses


@contextmanager
def no_connections() -> Iterator[list[object]]:
    """Every socket connection and system name lookup attempted inside, refused and recorded
    (the list yielded): a test asserts it stays empty."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("a connection was attempted")

    with (
        mock.patch.object(socket.socket, "connect", refuse),
        mock.patch.object(socket.socket, "connect_ex", refuse),
        mock.patch.object(socket, "create_connection", refuse),
        mock.patch.object(socket, "getaddrinfo", refuse),
    ):
        yield attempts
