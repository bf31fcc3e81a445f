"""Nsight Compute's CSV report -> one `KernelLaunch` per profiled kernel launch, and ncu's command line.

`ncu --csv --page raw` prints one header row (`"ID","Process ID","Process Name","Host Name","Kernel
Name",...` then one column per metric), one row of units (empty under the launch columns), then one
row per kernel launch; every field is quoted and numbers may carry thousands separators
("1,234.5"). Lines ncu writes about itself (`==PROF==`, `==WARNING==`, `==ERROR==`) and anything
the profiled program printed before the header are skipped. The `details` page (ncu's default) is
not read: it names metrics by display names ("Duration") and has one row per metric; a report
saved with `-o` gives the raw page with `ncu --import REPORT --csv --page raw`.

Units: durations are converted to nanoseconds, throughputs to bytes per second, whatever prefix
ncu chose (`--print-units base` asks for base units; older reports say `usecond`, `Gbyte/second`).
Percentages and ratios stay as printed. A value ncu could not read (`n/a`, empty) is left out, so
a summary says "not measured" rather than 0.

Pure functions: nothing here runs ncu (kevin.evaluator.profiling.run does).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

SECTIONS: tuple[str, ...] = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
"""ncu sections collected: their metric names come from ncu's own section files, so kevin never
guesses a name a given ncu version lacks (an unknown name in --metrics fails the whole run)."""

METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum.per_second",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
)
"""Metrics the summary reads, asked for by name as well (most are in the sections above already)."""

DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_BYTES_PER_S = "dram__bytes.sum.per_second"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCCUPANCY_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY_PCT = "sm__maximum_warps_per_active_cycle_pct"
OCCUPANCY_LIMIT_PREFIX = "launch__occupancy_limit_"
"""`launch__occupancy_limit_{blocks,registers,shared_mem,warps,...}`: blocks per SM each resource
allows; the smallest is the limiter."""

_LAUNCH_COLUMNS = ("ID", "Kernel Name", "Block Size", "Grid Size")
_TIME_SCALE_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_PREFIX_SCALE = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class NcuParseError(ValueError):
    """The text is not an ncu CSV report (no header row with `ID` and `Kernel Name`)."""


@dataclass(frozen=True)
class KernelLaunch:
    """One profiled kernel launch."""

    id: int
    name: str
    """The kernel's name as ncu printed it (often the full demangled signature)."""
    block_size: str = ""
    grid_size: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    """Metric name -> value in base units (durations in ns, throughput in bytes/s, percentages as %)."""

    @property
    def duration_ns(self) -> float | None:
        return self.metrics.get(DURATION)


def ncu_command(
    ncu: str,
    program: list[str],
    *,
    log_file: str,
    launch_count: int = 200,
    sections: tuple[str, ...] = SECTIONS,
    metrics: tuple[str, ...] = METRICS,
) -> list[str]:
    """The ncu command that profiles `program` (argv) and writes the raw CSV page to `log_file`.

    `--profile-from-start off`: only kernels between cudaProfilerStart and cudaProfilerStop (the
    target's measured forward calls) are profiled, never the build, the warm-up or input creation.
    `--clock-control none`: the GPU runs at the clocks kevin's timing saw (ncu's default locks base
    clocks), so a kernel's duration here compares with its `runtime_ms`; percentages of peak are
    relative and do not depend on it. `--launch-count` bounds the replay cost of a candidate that
    launches many kernels. `--log-file` keeps ncu's report apart from what the program prints."""
    if launch_count < 1:
        raise ValueError(f"launch_count must be at least 1, got {launch_count}")
    command = [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--launch-count",
        str(launch_count),
        "--log-file",
        log_file,
    ]
    for section in sections:
        command += ["--section", section]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    return command + list(program)


def parse_number(text: str) -> float | None:
    """ncu's printed number as a float: thousands separators dropped; None for `n/a` and the like."""
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def unit_scale(unit: str) -> float:
    """Factor taking a value in `unit` to kevin's base: nanoseconds for time, bytes (per second) for
    sizes and throughputs; 1 for anything else (%, ratios, counts, cycles)."""
    unit = unit.strip()
    time = re.fullmatch(r"([num]?)s(?:econd)?", unit)
    if time:
        return _TIME_SCALE_NS[(time.group(1) or "") + "s"]
    size = re.fullmatch(r"([KkMGTP]?)(?:byte|B)(/s(?:econd)?)?", unit)
    if size:
        return _PREFIX_SCALE[size.group(1)]
    return 1.0


def _value(text: str, unit: str) -> float | None:
    number = parse_number(text)
    return None if number is None else number * unit_scale(unit)


def _rows(text: str) -> list[list[str]]:
    """The CSV rows from the header on: ncu's own lines and program output before it dropped."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    for start, line in enumerate(lines):
        fields = next(csv.reader([line]), [])
        if "ID" in fields and "Kernel Name" in fields:
            return [row for row in csv.reader(io.StringIO("\n".join(lines[start:]))) if row]
    raise NcuParseError('no ncu CSV header (a row with "ID" and "Kernel Name") in the report')


def parse_csv(text: str) -> list[KernelLaunch]:
    """Every kernel launch in ncu's raw-page CSV report, in report order."""
    rows = _rows(text)
    header = rows[0]
    column = {name: index for index, name in enumerate(header)}
    if "Metric Name" in column:
        raise NcuParseError("this is ncu's details page (one row per metric); export it with --page raw")
    return _parse_wide(rows[1:], header, column)


def _cell(row: list[str], column: dict[str, int], name: str) -> str:
    index = column.get(name)
    return row[index] if index is not None and index < len(row) else ""


def _parse_wide(rows: list[list[str]], header: list[str], column: dict[str, int]) -> list[KernelLaunch]:
    units = [""] * len(header)
    if rows and parse_number(_cell(rows[0], column, "ID")) is None:
        units = rows[0] + [""] * (len(header) - len(rows[0]))
        rows = rows[1:]
    first_metric = max(column[name] for name in _LAUNCH_COLUMNS if name in column) + 1
    # Launch columns ncu adds after the named ones (Device, CC, ...) hold no metric: metric names
    # always have the `unit__counter` form.
    metric_columns = [i for i in range(first_metric, len(header)) if "__" in header[i]]
    launches = []
    for row in rows:
        launch_id = parse_number(_cell(row, column, "ID"))
        if launch_id is None:
            continue
        metrics = {}
        for index in metric_columns:
            value = _value(row[index], units[index]) if index < len(row) else None
            if value is not None:
                metrics[header[index]] = value
        launches.append(
            KernelLaunch(
                id=int(launch_id),
                name=_cell(row, column, "Kernel Name"),
                block_size=_cell(row, column, "Block Size"),
                grid_size=_cell(row, column, "Grid Size"),
                metrics=metrics,
            )
        )
    return launches
