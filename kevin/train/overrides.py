"""Text into config and back: dotted command-line overrides, and the config's JSON form.

`apply_overrides(config, ["loss.clip_high=0.3", ...])` parses each value into its field's type
(int, float, bool, str, tuples as comma lists, `none` for optional fields) and fails with one line
naming the key and what it accepts; the field's own validation runs on the new value. `save_config`
and `load_config` write and read the resolved config as JSON (`config.json` in the run directory);
`config_differences` lists what a resumed launch changed, launch fields excepted.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

from kevin.errors import UsageError
from kevin.train.config import TrainConfig

CONFIG_FILE = "config.json"
"""Name of the resolved config inside a run directory."""


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _parse_value(text: str, annotation: Any) -> Any:
    """`text` as a value of type `annotation` (int, float, bool, str, tuples, `X | None`)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if text.strip().lower() in ("none", "null"):
            return None
        return _parse_value(text, members[0])
    if origin is tuple:
        (item, *_rest) = typing.get_args(annotation)
        parts = [p.strip() for p in text.split(",") if p.strip()]
        return tuple(_parse_value(p, item) for p in parts)
    if annotation is bool:
        return _parse_bool(text)
    if annotation is int:
        return int(text.replace("_", ""))
    if annotation is float:
        return float(text)
    if annotation is str:
        return text
    raise ValueError(f"fields of type {annotation} cannot be set from the command line")


def _describe(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return f"{_describe(members[0])} or none"
    if origin is tuple:
        return f"a comma-separated list of {_describe(typing.get_args(annotation)[0])}"
    return getattr(annotation, "__name__", str(annotation))


def apply_override(config: TrainConfig, assignment: str) -> TrainConfig:
    """`config` with one `section.field=value` applied; UsageError (one line) when it does not fit."""
    key, equals, text = assignment.partition("=")
    key = key.strip()
    section_name, dot, field_name = key.partition(".")
    sections = [f.name for f in dataclasses.fields(config) if f.default_factory is not dataclasses.MISSING]
    if not equals or not dot:
        raise UsageError(f"--set {assignment!r}: write section.field=value, e.g. loss.clip_high=0.3")
    if section_name not in sections:
        raise UsageError(f"--set {key}: unknown section {section_name!r}; known: {', '.join(sections)}")
    section = getattr(config, section_name)
    hints = typing.get_type_hints(type(section))
    if field_name not in hints:
        known = ", ".join(f.name for f in dataclasses.fields(section))
        raise UsageError(f"--set {key}: {section_name} has no field {field_name!r}; known: {known}")
    try:
        value = _parse_value(text, hints[field_name])
    except ValueError as exc:
        raise UsageError(f"--set {key}={text}: expected {_describe(hints[field_name])} ({exc})") from None
    try:
        return dataclasses.replace(
            config, **{section_name: dataclasses.replace(section, **{field_name: value})}
        )
    except UsageError as exc:
        raise UsageError(f"--set {key}={text}: {exc}") from None


def apply_overrides(config: TrainConfig, assignments: list[str] | tuple[str, ...]) -> TrainConfig:
    for assignment in assignments:
        config = apply_override(config, assignment)
    return config


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Rebuild a TrainConfig from `to_dict()` output (lists become tuples; unknown keys are errors)."""
    sections: dict[str, Any] = {}
    for f in dataclasses.fields(TrainConfig):
        if f.name not in data:
            continue
        if f.name == "preset":
            sections["preset"] = data["preset"]
            continue
        cls = type(f.default_factory())
        hints = typing.get_type_hints(cls)
        values = dict(data[f.name])
        unknown = set(values) - set(hints)
        if unknown:
            raise UsageError(f"config section {f.name} has unknown fields {sorted(unknown)}")
        for name, value in values.items():
            if isinstance(value, list):
                values[name] = tuple(value)
        sections[f.name] = cls(**values)
    return TrainConfig(**sections)


def save_config(config: TrainConfig, run_dir: str | Path) -> Path:
    path = Path(run_dir) / CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_config(run_dir: str | Path) -> TrainConfig:
    path = Path(run_dir) / CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path} not found; is {run_dir} a training run directory?") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg})") from None
    return config_from_dict(data)


LAUNCH_FIELDS = frozenset(
    {"loop.stop_after_steps", "loop.steps", "loop.time_limit_s", "loop.eval_at_resume", "evaluator.cache_dir"}
)
"""Fields a resumed run may change: how far (and how long) this launch goes, how far the run goes,
whether it first re-evaluates the step it resumes from (the machine may differ), and where this
machine keeps the evaluator's builds and baselines (a run carried to a new machine finds its cache
elsewhere; what is in it is re-checked, never part of the run's state)."""


def config_differences(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """`section.field` keys whose values differ, launch fields excluded."""
    differences = []
    for section, values in saved.to_dict().items():
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            key = f"{section}.{name}"
            if key not in LAUNCH_FIELDS and current.to_dict()[section][name] != value:
                differences.append(key)
    return differences
