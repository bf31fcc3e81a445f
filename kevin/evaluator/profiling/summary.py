"""A profile reduced to the few lines a model can act on, within a character budget.

Input: per-kernel statistics (`KernelStats`), from ncu's launches (`aggregate`) or from
torch.profiler's table (the target writes those directly). Output, most important first:

    Profile (ncu, 3 forward calls): 6 launches of 2 kernels, 41.3 us GPU time per forward.
    1. gelu_kernel: 1 launch per forward, 12.3 us each, 89% of GPU time
      DRAM 82.1% of peak (3.93 TB/s), compute (SM) 21.0% -> memory-bound
      occupancy 78.2% achieved of 100.0% theoretical, limited by registers; block (256, 1, 1), grid (4096, 1, 1)
      top stalls: long_scoreboard 61%, wait 12%, math_pipe_throttle 8%
    2. ...

Rules:
  * kernels are ranked by total time; per-kernel metrics are time-weighted means over its launches;
  * occupancy's limiter is the resource (`launch__occupancy_limit_*`, blocks per SM it allows)
    with the smallest value; ties name every tied resource;
  * stall shares are each reason's value over the sum of all reasons of one metric family (one
    unit): the first family present of `STALL_FAMILIES`, else the one with most reasons; `selected`
    (issuing, not a stall) and `*_not_issued` are left out;
  * the bound reading is kevin's rule of thumb, not ncu's: memory-bound when DRAM is at >= 60% of
    peak and above the SM's share, compute-bound when the SM is at >= 60%, latency-bound when both
    are under 40%, nothing said otherwise;
  * `fit` keeps the text within `max_chars` by dropping whole lines, least important first (a later
    kernel before an earlier one's details; within a kernel: stalls, then occupancy, then memory,
    then its title); the header is cut with a visible marker only when it alone is too long.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from kevin.evaluator.profiling import ncu

STALL_FAMILIES: tuple[str, ...] = (
    "smsp__average_warp_latency_issue_stalled_",
    "smsp__average_warps_issue_stalled_",
    "smsp__pcsamp_warps_issue_stalled_",
    "smsp__warps_issue_stalled_",
)
"""Stall metric families, preferred first (each family's reasons share one unit)."""

_STALL = re.compile(
    r"(?P<family>smsp__[a-z_]*?issue_stalled_)(?P<reason>[a-z_]+?)(?P<tail>_per_[a-z_]+)?(?P<rollup>\.[a-z_.]+)?"
)
MEMORY_BOUND_PCT = 60.0
COMPUTE_BOUND_PCT = 60.0
IDLE_PCT = 40.0
KERNELS_SHOWN = 3
MIN_CHARS = 80


@dataclass(frozen=True)
class KernelStats:
    """One kernel (all launches of one name)."""

    name: str
    launches: int
    total_ns: float
    metrics: dict[str, float] = field(default_factory=dict)
    """Time-weighted mean of each metric over the launches (ncu only; empty from torch.profiler)."""
    block_size: str = ""
    grid_size: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "launches": self.launches,
            "total_ns": self.total_ns,
            "metrics": dict(self.metrics),
            "block_size": self.block_size,
            "grid_size": self.grid_size,
        }


_NOISE = frozenset(
    """lambda operator const unsigned signed long int short char bool float double void auto array Half
    BFloat16 TensorIteratorBase OffsetCalculator""".split()
)
"""Words of a template's arguments that tell no kernel from another (types, lambdas' wrapping)."""

_WORD = re.compile(r"(?<!\w)[A-Za-z_]\w*")


def short_name(name: str, limit: int = 60) -> str:
    """`void gelu_kernel<float>(float const*, float*, int)` -> `gelu_kernel<float>`: no return type,
    no parameter list, at most `limit` characters. A longer template keeps its own name and the words
    of its arguments that name something (functors, the op's own function), so that torch's
    `at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float,
    at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >` reads
    `vectorized_elementwise_kernel<BinaryFunctor, MulFunctor>`: cut at the limit, every ATen
    elementwise kernel read the same (session 39's optimize report). `(anonymous namespace)::` is
    dropped first: its parenthesis cut `void (anonymous namespace)::softmax_warp_forward<...>(...)` to
    `void`."""
    text = name.strip().replace("(anonymous namespace)::", "")
    depth = 0
    for index, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and index > 0:
            text = text[:index].rstrip()
            break
    if text.startswith("void "):
        text = text[len("void ") :]
    if len(text) <= limit:
        return text
    opening = text.find("<")
    if opening > 0:
        words: list[str] = []
        for match in _WORD.finditer(text, opening):
            word = match.group()
            # A qualifier (`at::`, `binary_internal::`) is left for the name it qualifies.
            if word not in _NOISE and text[match.end() : match.end() + 2] != "::" and word not in words:
                words.append(word)
        head = text[:opening].rsplit("::", 1)[-1]
        text = f"{head}<{', '.join(words)}>" if words else head
    return text if len(text) <= limit else text[: limit - 3] + "..."


def aggregate(launches: Sequence[ncu.KernelLaunch]) -> list[KernelStats]:
    """ncu's launches grouped by kernel (its full name: two kernels whose short names agree keep their
    own metrics), named by `short_name`, longest total time first."""
    groups: dict[str, list[ncu.KernelLaunch]] = {}
    for launch in launches:
        groups.setdefault(launch.name, []).append(launch)
    kernels = []
    for full_name, group in groups.items():
        name = short_name(full_name)
        durations = [launch.duration_ns or 0.0 for launch in group]
        total = sum(durations)
        weights = durations if total > 0 else [1.0] * len(group)
        metrics: dict[str, float] = {}
        for metric in sorted({m for launch in group for m in launch.metrics}):
            pairs = [
                (launch.metrics[metric], w) for launch, w in zip(group, weights) if metric in launch.metrics
            ]
            weight = sum(w for _, w in pairs)
            if weight > 0:
                metrics[metric] = sum(value * w for value, w in pairs) / weight
            else:
                metrics[metric] = sum(value for value, _ in pairs) / len(pairs)
        if total > 0:
            metrics[ncu.DURATION] = total / len(group)
        kernels.append(KernelStats(name, len(group), total, metrics, group[0].block_size, group[0].grid_size))
    return sorted(kernels, key=lambda k: (-k.total_ns, k.name))


def stall_shares(metrics: dict[str, float]) -> list[tuple[str, float]]:
    """(reason, % of all stall reasons of the chosen family), largest first."""
    families: dict[str, dict[str, float]] = {}
    for name, value in metrics.items():
        match = _STALL.fullmatch(name)
        if not match:
            continue
        reason = match["reason"]
        if reason == "selected" or reason.endswith("_not_issued"):
            continue
        key = match["family"] + "*" + (match["tail"] or "") + (match["rollup"] or "")
        families.setdefault(key, {})[reason] = value

    def preference(key: str) -> tuple[int, int]:
        ranks = [i for i, prefix in enumerate(STALL_FAMILIES) if key.startswith(prefix + "*")]
        return (ranks[0] if ranks else len(STALL_FAMILIES), -len(families[key]))

    for key in sorted(families, key=preference):
        reasons = families[key]
        total = sum(v for v in reasons.values() if v > 0)
        if total > 0:
            shares = [(reason, 100.0 * value / total) for reason, value in reasons.items() if value > 0]
            return sorted(shares, key=lambda item: (-item[1], item[0]))
    return []


def occupancy_limiters(metrics: dict[str, float]) -> list[str]:
    """The resources that allow the fewest blocks per SM (`registers`, `shared_mem`, `warps`, ...)."""
    limits = {
        name[len(ncu.OCCUPANCY_LIMIT_PREFIX) :]: value
        for name, value in metrics.items()
        if name.startswith(ncu.OCCUPANCY_LIMIT_PREFIX)
    }
    if not limits:
        return []
    lowest = min(limits.values())
    return sorted(name for name, value in limits.items() if value == lowest)


def bound_reading(metrics: dict[str, float]) -> str:
    """`memory-bound`, `compute-bound`, `latency-bound` or "" (see the module docstring)."""
    dram, sm = metrics.get(ncu.DRAM_PCT), metrics.get(ncu.SM_PCT)
    if dram is not None and dram >= MEMORY_BOUND_PCT and (sm is None or dram >= sm):
        return "memory-bound"
    if sm is not None and sm >= COMPUTE_BOUND_PCT:
        return "compute-bound"
    if dram is not None and sm is not None and dram < IDLE_PCT and sm < IDLE_PCT:
        return "latency-bound (neither DRAM nor SM busy)"
    return ""


def format_time(ns: float) -> str:
    if ns < 1e3:
        return f"{ns:.3g} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.3g} us"
    return f"{ns / 1e6:.3g} ms"


def format_bandwidth(bytes_per_s: float) -> str:
    if bytes_per_s >= 1e12:
        return f"{bytes_per_s / 1e12:.3g} TB/s"
    return f"{bytes_per_s / 1e9:.3g} GB/s"


def _plural(count: float, word: str) -> str:
    if count == 1:
        return f"{count:g} {word}"
    return f"{count:g} {word}" + ("es" if word.endswith(("ch", "sh", "s", "x")) else "s")


def kernel_lines(
    rank: int, kernel: KernelStats, forward_calls: int, total_ns: float, device: str
) -> list[str]:
    """Title, then (when measured) memory/compute, occupancy and stall lines of one kernel."""
    per_forward = round(kernel.launches / forward_calls, 2)
    title = (
        f"{rank}. {kernel.name}: {_plural(per_forward, 'launch' if device == 'GPU' else 'call')} per forward"
    )
    if kernel.total_ns > 0:
        share = 100.0 * kernel.total_ns / total_ns if total_ns > 0 else 0.0
        title += f", {format_time(kernel.total_ns / kernel.launches)} each, {share:.0f}% of {device} time"
    lines = [title]
    m = kernel.metrics
    parts = []
    if ncu.DRAM_PCT in m:
        text = f"DRAM {m[ncu.DRAM_PCT]:.1f}% of peak"
        if ncu.DRAM_BYTES_PER_S in m:
            text += f" ({format_bandwidth(m[ncu.DRAM_BYTES_PER_S])})"
        parts.append(text)
    if ncu.SM_PCT in m:
        parts.append(f"compute (SM) {m[ncu.SM_PCT]:.1f}%")
    if parts:
        reading = bound_reading(m)
        lines.append("  " + ", ".join(parts) + (f" -> {reading}" if reading else ""))
    if ncu.ACHIEVED_OCCUPANCY_PCT in m:
        text = f"  occupancy {m[ncu.ACHIEVED_OCCUPANCY_PCT]:.1f}% achieved"
        if ncu.THEORETICAL_OCCUPANCY_PCT in m:
            text += f" of {m[ncu.THEORETICAL_OCCUPANCY_PCT]:.1f}% theoretical"
        limiters = occupancy_limiters(m)
        if limiters:
            text += ", limited by " + " and ".join(limiters)
        if kernel.block_size:
            text += f"; block {kernel.block_size}, grid {kernel.grid_size}"
        lines.append(text)
    stalls = stall_shares(m)
    if stalls:
        lines.append("  top stalls: " + ", ".join(f"{reason} {share:.0f}%" for reason, share in stalls[:3]))
    return lines


def summarize(
    kernels: Sequence[KernelStats],
    *,
    tool: str,
    forward_calls: int,
    max_chars: int,
    device: str = "GPU",
    note: str = "",
) -> str:
    """The summary text (module docstring), at most `max_chars` characters."""
    if forward_calls < 1:
        raise ValueError(f"forward_calls must be at least 1, got {forward_calls}")
    what = "kernel" if device == "GPU" else "op"
    total_ns = sum(k.total_ns for k in kernels)
    launches = sum(k.launches for k in kernels)
    header = f"Profile ({tool}, {_plural(forward_calls, 'forward call')}): "
    if not kernels:
        header += f"no {device} {what}s ran."
    else:
        header += (
            f"{_plural(launches, 'launch' if device == 'GPU' else 'call')} of {_plural(len(kernels), what)}"
        )
        header += (
            f", {format_time(total_ns / forward_calls)} {device} time per forward." if total_ns > 0 else "."
        )
    if note:
        header += f" {note}"
    lines: list[tuple[int, str]] = [(0, header)]
    for rank, kernel in enumerate(kernels[:KERNELS_SHOWN]):
        for detail, text in enumerate(kernel_lines(rank + 1, kernel, forward_calls, total_ns, device)):
            # Kernel r's lines rank 10r+1 (title) .. 10r+4 (stalls): a later kernel goes first.
            lines.append((10 * rank + 1 + detail, text))
    rest = kernels[KERNELS_SHOWN:]
    if rest:
        share = 100.0 * sum(k.total_ns for k in rest) / total_ns if total_ns > 0 else 0.0
        lines.append((5, f"({_plural(len(rest), 'more ' + what)}: {share:.0f}% of {device} time)"))
    return fit(lines, max_chars)


def fit(lines: Sequence[tuple[int, str]], max_chars: int) -> str:
    """`lines` ((priority, text), 0 = most important) joined by newlines, within `max_chars`: the
    line with the largest priority (the last of equals) goes first until the text fits."""
    if max_chars < MIN_CHARS:
        raise ValueError(f"max_chars must be at least {MIN_CHARS}, got {max_chars}")
    kept = list(lines)
    while len(kept) > 1 and len("\n".join(text for _, text in kept)) > max_chars:
        worst = max(range(len(kept)), key=lambda i: (kept[i][0], i))
        del kept[worst]
    text = "\n".join(text for _, text in kept)
    if len(text) > max_chars:
        marker = " [cut by kevin]"
        text = text[: max_chars - len(marker)] + marker
    return text
