"""Stopping child processes without leaving orphans."""

import contextlib

import psutil


def terminate_tree(pid: int, timeout: float = 20) -> None:
    """SIGTERM a process and its descendants; SIGKILL whatever is left after timeout."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=5)
