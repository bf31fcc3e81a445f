"""Where step metrics go: `metrics.jsonl` always, tensorboard and Weights & Biases when asked.

The `Logger` protocol is one method, `log(step, metrics)`, plus `close()`. Metrics are a flat dict of
numbers keyed `section/name` (`rollout/reward_mean`, `learn/grad_norm`, `time/generate_s`,
`heldout/correct`); `flatten` turns nested dicts into that shape and drops what is not a number.

`metrics.jsonl` holds one JSON object per step (`{"step": n, ...}`); the plot (kevin.train.plot) and
people read it. On resume, rows of steps after the checkpoint are dropped first (`truncate_jsonl`),
so the file never holds a step twice. tensorboard (`torch.utils.tensorboard`, needs the tensorboard
package) and wandb are imported only when turned on; a missing package is a warning, not a failure.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"


class Logger(Protocol):
    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Nested dicts to `a/b` keys; numbers only (bools as 0/1), non-finite values dropped."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, prefix=f"{name}/"))
        elif isinstance(value, bool):
            flat[name] = float(value)
        elif isinstance(value, (int, float)) and math.isfinite(float(value)):
            flat[name] = float(value)
    return flat


def truncate_jsonl(path: Path, after_step: int) -> None:
    """Drop the rows of `path` whose `step` is greater than `after_step` (resume)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and int(json.loads(line).get("step", 0)) <= after_step:
            kept.append(line)
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class JsonlLogger:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, **metrics}, sort_keys=True) + "\n")

    def close(self) -> None:
        pass


class TensorBoardLogger:
    def __init__(self, directory: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(directory))

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    def __init__(self, project: str, run_dir: Path, config: dict[str, Any], resume: bool) -> None:
        import wandb

        self.run = wandb.init(
            project=project,
            dir=str(run_dir),
            config=config,
            name=run_dir.name,
            resume="allow" if resume else None,
        )

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class Loggers:
    """Every configured logger behind one `log`."""

    def __init__(self, loggers: list[Logger]) -> None:
        self.loggers = loggers

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for logger in self.loggers:
            logger.log(step, metrics)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def open_loggers(
    run_dir: Path, *, tensorboard: bool, wandb_project: str, config: dict[str, Any], resume: bool
) -> Loggers:
    loggers: list[Logger] = [JsonlLogger(run_dir / METRICS_FILE)]
    if tensorboard:
        try:
            loggers.append(TensorBoardLogger(run_dir / "tensorboard"))
        except ImportError as exc:
            log.warning("tensorboard logging is off: %s (pip install tensorboard)", exc)
    if wandb_project:
        try:
            loggers.append(WandbLogger(wandb_project, run_dir, config, resume))
        except ImportError as exc:
            log.warning("wandb logging is off: %s (pip install wandb)", exc)
    return Loggers(loggers)
