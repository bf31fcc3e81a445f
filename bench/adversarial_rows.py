"""The adversarial table's rows as they are made (bench/adversarial.py): the lanes' parallel phase,
writing each row as its candidate finishes, and `--resume`, which keeps the rows of an earlier run
cut short (a device call ends at 10 minutes; the CUDA table takes longer)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from kevin.search.rundir import read_rows  # a last line cut short by a kill is dropped


def run_lanes(
    entries: list[Any], lanes: int, run: Callable[[Any], dict[str, Any]], provisional: Path
) -> list[dict[str, Any]]:
    """`run` over `entries`, `lanes` at a time; each row is also appended to `provisional` as its
    candidate finishes (the phase's side effects are read only once it is over), so a call cut short
    mid-phase keeps the rows it made for `--resume`. Interrupted, the phase runs nothing more; the
    candidates already running still write their rows."""
    write_lock = threading.Lock()
    rows: list[dict[str, Any]] = []

    def keep(future: Future) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        row = future.result()
        with write_lock:
            rows.append(row)
            with provisional.open("a") as handle:
                handle.write(json.dumps(row, default=str) + "\n")

    pool = ThreadPoolExecutor(max_workers=lanes)
    futures = [pool.submit(run, entry) for entry in entries]
    for future in futures:
        future.add_done_callback(keep)
    try:
        wait(futures)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for future in futures:
        future.result()  # a lane's own error stops the run, as one candidate's would
    return rows


def resumed_rows(
    partial: Path, provisional: Path, leftover: Callable[[], dict[str, Any]], clear: Callable[[], None]
) -> list[dict[str, Any]]:
    """`--resume`: the rows an earlier run under the same --out finished (its rows file), and the
    lanes' rows of a parallel phase it was cut short in. Those count only if the phase left nothing
    behind that can still be read (on a machine started afresh nothing can: `side_effects_read` says
    when they were read); else their candidates run again."""
    rows = read_rows(partial)
    done = {row["candidate"] for row in rows}
    lanes = [row for row in read_rows(provisional) if row["candidate"] not in done]
    if lanes:
        left = leftover()
        if left:
            print(
                f"the cut-short parallel phase left {left}: its {len(lanes)} rows are made again", flush=True
            )
            clear()
            return rows
        for row in lanes:
            row["side_effects_read"] = "when resumed"
    return rows + lanes
