"""Ports: how a lower layer calls into an app above it without importing it.

Imports run downward only (chat, mcp_server → conversations, memory, worldmodel → answers →
audit → datasets → knowledge → core; import-linter's contract in `make lint`). Where a lower
layer needs what an upper app knows — the answer path steered by memory, the worker's sweep
settling answer runs — the lower layer owns a port and the upper app fills it in its
`AppConfig.ready()`. A port nobody filled fails loudly: it never quietly does nothing.
"""

from collections.abc import Callable, Iterator

from django.core.exceptions import ImproperlyConfigured


class Port[F: Callable[..., object]]:
    """One function a lower layer calls and exactly one upper app provides."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._provided: F | None = None

    def provide(self, function: F) -> F:
        """Fill the port (from an `AppConfig.ready()`); filling it again with another
        function is a mistake of the wiring, not a way to override it."""
        if self._provided is not None and self._provided is not function:
            raise ImproperlyConfigured(f"The port {self.name!r} is provided twice.")
        self._provided = function
        return function

    @property
    def call(self) -> F:
        if self._provided is None:
            raise ImproperlyConfigured(f"No installed app provides the port {self.name!r}.")
        return self._provided


class Hooks[F: Callable[..., object]]:
    """Functions several apps contribute to one lower-layer loop (the worker's sweep, the
    health report), run in the order they name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._items: dict[F, int] = {}

    def add(self, function: F, *, order: int) -> F:
        self._items[function] = order  # once per function, however often ready() runs
        return function

    def __iter__(self) -> Iterator[F]:
        return iter(sorted(self._items, key=self._items.__getitem__))
