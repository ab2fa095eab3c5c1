"""CPU seconds of process trees, read from /proc (Linux): where a benchmark's work went.

A process tree's CPU is its own (all threads), what it has reaped of exited children
(cutime, cstime: PostgreSQL's backends of closed connections) and that of its live
descendants, so a snapshot before and after a load gives the CPU the load cost the tree.
"""

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds so far of the trees rooted at `pids` (user + system)."""
    children = _children()
    total, seen, todo = 0, set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen or (fields := _stat(pid)) is None:
            continue
        seen.add(pid)
        # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after "pid (comm) ".
        total += sum(int(value) for value in fields[11:15])
        todo += children.get(pid, [])
    return total / _TICK


def own_cpu() -> float:
    """CPU seconds of this process (all its threads)."""
    times = os.times()
    return times.user + times.system
