"""Child processes: how many extraction processes to start, and stopping them without
leaving orphans."""

import contextlib
import os

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


# Each extraction process holds the embedding model and a fork server of its own: more
# than this many would cost memory for little gain on a larger machine.
EXTRACTION_PROCESSES_MAX = 8


def cores_available() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    return len(os.sched_getaffinity(0)) or os.cpu_count() or 1


def extraction_processes_default() -> int:
    """Extraction worker processes `koinon_up` starts: one per available core, at most
    EXTRACTION_PROCESSES_MAX, so documents are extracted side by side (issue 51, item 6).
    Answers have a worker of their own and never wait behind these."""
    return max(1, min(cores_available(), EXTRACTION_PROCESSES_MAX))
