"""What `koinon_up` shows a person and what it keeps (issue 51, item 6).

The terminal gets a short progress, a line per step; everything else — this process's own
logging, the output of the commands it calls (check, migrate, collectstatic) and the whole
output of every child process (workers, web processes) — goes to one log file under the
data directory's `log/` folder, which the first progress line names.
"""

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Protocol

LOG_NAME = "koinon.log"
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def start_log_path(data_dir: Path) -> Path:
    """The log file of `koinon_up` on this data directory."""
    return data_dir / "log" / LOG_NAME


def shown_path(path: Path) -> str:
    """The path as a person would type it here: relative to the working directory when
    inside it (`var/log/koinon.log` after `make run`), else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class Terminal(Protocol):
    """Where progress is shown: a stream, or a management command's `self.stdout`."""

    def write(self, msg: str, /) -> object: ...

    def flush(self) -> None: ...


class StartLog:
    """One start's progress (terminal and log) and its full log (file only).

    `stream` is the log file opened for appending, line-buffered, for child processes to
    inherit as their stdout and stderr; each start begins with a dated separator line.
    """

    def __init__(self, data_dir: Path, terminal: Terminal) -> None:
        self.path = start_log_path(data_dir)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.terminal = terminal
        self.stream: IO[str] = self.path.open("a", buffering=1, encoding="utf-8")
        started = datetime.now(tz=UTC).isoformat(timespec="seconds")
        self.stream.write(f"\n===== koinon_up started {started} (pid {os.getpid()}) =====\n")

    def progress(self, message: str) -> None:
        """A step a person sees, kept in the log too."""
        self.terminal.write(message + "\n")
        self.terminal.flush()
        self.note(message)

    def note(self, message: str) -> None:
        """A detail for the log only."""
        self.stream.write(message + "\n")
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    @contextmanager
    def logging_to_file(self) -> Iterator[None]:
        """This process's logging goes to the log file instead of the terminal while the
        block runs; the handlers it had come back afterwards."""
        root = logging.getLogger()
        saved = root.handlers[:]
        handler = logging.StreamHandler(self.stream)
        handler.setFormatter(logging.Formatter(FORMAT))
        root.handlers = [handler]
        try:
            yield
        finally:
            root.handlers = saved

    def close(self) -> None:
        self.stream.close()
