"""What a trusted process reads from /proc about another (or itself), and the tree kill.

  stat_fields, running, parent_of   a process's stat line; whether any of its threads can still run
                                    (an exiting or zombie leader is read thread by thread)
  descendants, kill_descendants     the live processes below a root, stopped then killed (the
                                    subreaper's sweep when there is no PID namespace to end)
  os_thread_count, os_threads       OS threads, native ones included
  counters, counted_since           page faults and context switches (around a timing)
  scheduling_state                  nice value, scheduler policy and affinity of every thread
  status_fields                     /proc/<pid>/status as a dict

Plain file reads: nothing here confines anything (kevin.evaluator.confine does), so a check made
from outside a runner does not depend on the runner's cooperation, only on /proc being the one of
the runner's namespace or its parent's.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any


def stat_fields(pid: int | str, tid: int | None = None) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat (of its thread `tid` when given; pid "self": this process)
    after the command name (state first); None when it is gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces; fields after it are fixed.
    return data[data.rfind(b")") + 2 :].split()


PF_EXITING = 0x4
"""The kernel's per-task flag set when do_exit begins (include/linux/sched.h)."""


def _ending(fields: list[bytes]) -> bool:
    if fields[0] in (b"Z", b"X"):
        return True
    try:
        return bool(int(fields[6]) & PF_EXITING)
    except (IndexError, ValueError):
        return False


def running(pid: int, fields: list[bytes]) -> bool:
    """Whether any thread of process `pid` (`fields`: its stat_fields) can still run. Not when its
    exit has begun (a zombie, or PF_EXITING while it tears down: a runner just killed). But a leader
    thread that ended alone (SYS_exit, not exit_group) shows the whole process as a zombie in
    /proc/<pid>/stat while its other threads run on: those are read too."""
    if not _ending(fields):
        return True
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        task = stat_fields(pid, int(tid)) if tid.isdigit() and int(tid) != pid else None
        if task is not None and not _ending(task):
            return True
    return False


def parent_of(pid: int) -> tuple[int, bool] | None:
    """(parent pid, running) of a process; None when it is gone. A process whose every thread has
    begun to exit is not running (`running`)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return int(fields[1]), running(pid, fields)


def counters(pid: int) -> dict[str, Any] | None:
    """A process's page faults (minor, major: /proc/<pid>/stat, every thread's, the ended ones' too)
    and each live thread's context switches (`threads`: tid -> [voluntary, forced]); None when it is
    gone. Read before and after a timing (`counted_since`), they say whether its cycles and fetches
    met faults or preemption."""
    fields = stat_fields(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    if fields is None:
        return None
    threads = {}
    for tid in tids:  # a thread that ends meanwhile reads as {}: left out
        status = status_fields(f"{pid}/task/{tid}")
        if status:
            threads[tid] = [
                int(status.get("voluntary_ctxt_switches", 0)),
                int(status.get("nonvoluntary_ctxt_switches", 0)),
            ]
    return {"minflt": int(fields[7]), "majflt": int(fields[9]), "threads": threads}


def counted_since(before: dict[str, Any] | None, pid: int) -> dict[str, int] | None:
    """What `pid` counted since `before` (its `counters`), None when either read is missing. Context
    switches are a thread's own, and Linux keeps no per-process sum of them to read from outside: a
    thread seen at both reads adds its difference, one started since adds all of its own, one that
    ended adds nothing (`threads_ended` says how many: the count is then a lower bound)."""
    now = counters(pid)
    if before is None or now is None:
        return None
    then, live = before["threads"], now["threads"]
    counts = {"minflt": now["minflt"] - before["minflt"], "majflt": now["majflt"] - before["majflt"]}
    for index, key in enumerate(("voluntary", "forced")):
        counts[key] = sum(switches[index] - then.get(tid, [0, 0])[index] for tid, switches in live.items())
    counts["threads_ended"] = len(then.keys() - live.keys())
    counts["threads_started"] = len(live.keys() - then.keys())
    return counts


def descendants(root: int) -> list[int]:
    """Live processes below `root` in the process tree."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        info = parent_of(int(name))
        if info is None:
            continue
        children.setdefault(info[0], []).append(int(name))
        if info[1]:
            alive.add(int(name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return [pid for pid in found if pid in alive]


def kill_descendants(root: int, seen: Callable[[int], None] | None = None) -> int:
    """Stop every process below `root` (so none can fork away), then kill them; return how many.
    `seen(pid)` is called for each as it is found, before it is stopped."""
    found: set[int] = set()
    for _ in range(5):
        fresh = [pid for pid in descendants(root) if pid not in found]
        if not fresh:
            break
        for pid in fresh:
            if seen is not None:
                seen(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        found.update(fresh)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(found)


def status_fields(which: str) -> dict[str, str]:
    """The "Key: value" lines of /proc/<which>/status ({} when it cannot be read)."""
    fields = {}
    with contextlib.suppress(OSError):
        with open(f"/proc/{which}/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    return fields



def os_thread_count(pid: int | None = None) -> int:
    """OS threads of a process (this one when None), native threads included."""
    return len(os.listdir(f"/proc/{'self' if pid is None else pid}/task"))


def os_threads(pid: int | None = None) -> dict[int, str]:
    """OS threads of a process (this one when None): thread id -> its name (comm); a thread that
    ends while this reads is left out."""
    root = f"/proc/{'self' if pid is None else pid}/task"
    names = {}
    for tid in os.listdir(root):
        try:
            with open(f"{root}/{tid}/comm") as comm:
                names[int(tid)] = comm.read().strip()
        except OSError:
            continue
    return names


_POLICIES = {
    0: "SCHED_OTHER",
    1: "SCHED_FIFO",
    2: "SCHED_RR",
    3: "SCHED_BATCH",
    5: "SCHED_IDLE",
    6: "SCHED_DEADLINE",
}


def _cpu_list(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus += range(int(low), int(high) + 1)
        elif part.strip():
            cpus.append(int(part))
    return cpus


def scheduling_state(pid: int | None = None) -> dict[str, Any]:
    """Nice value, scheduler policy and CPU affinity of a process (this one when None), read from
    /proc so a trusted process can check a runner from outside. The top-level values are the main
    thread's; `threads` maps each thread id to its own, and `uniform` says whether they all agree."""
    who = "self" if pid is None else pid
    threads: dict[int, dict[str, Any]] = {}
    for tid in sorted(os.listdir(f"/proc/{who}/task"), key=int):
        fields = stat_fields(who, int(tid))
        if fields is None:
            continue  # the thread ended meanwhile
        affinity = _cpu_list(status_fields(f"{who}/task/{tid}").get("Cpus_allowed_list", ""))
        policy = int(fields[38])
        threads[int(tid)] = {
            "nice": int(fields[16]),
            "policy": _POLICIES.get(policy, str(policy)),
            "rt_priority": int(fields[37]),
            "affinity": affinity,
        }
    leader = pid if pid is not None else int(os.readlink("/proc/self"))  # the main thread's id
    main = threads.get(leader) or (threads[min(threads)] if threads else {})
    return dict(main, threads=threads, uniform=all(state == main for state in threads.values()))
