"""The `kevin` command: help for every subcommand, exit codes, one-line errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from kevin.cli import build_parser, main


def subcommand_paths() -> list[list[str]]:
    """Every subcommand path (`["tasks", "list"]`, `["eval"]`, ...) the parser knows."""
    paths: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    paths.append(prefix + [name])
                    walk(sub, prefix + [name])

    walk(build_parser(), [])
    return paths


def test_top_level_help(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("tasks", "eval", "eval-batch", "check", "metrics"):
        assert command in out


@pytest.mark.parametrize("path", subcommand_paths(), ids=lambda p: " ".join(p))
def test_every_subcommand_has_help(path, capsys):
    assert main([*path, "--help"]) == 0
    assert "usage: kevin " + " ".join(path) in capsys.readouterr().out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_unknown_command_is_one_line_exit_2(capsys):
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kevin: error:") and len(err.splitlines()) == 1


def test_eval_missing_file_is_one_line_exit_2(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nope.py"), str(tmp_path / "nope2.py"), "--backend", "cpp"]) == 2
    err = capsys.readouterr().err.strip()
    assert "problem file not found" in err and len(err.splitlines()) == 1


def test_eval_batch_bad_manifest_row(tmp_path, capsys):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a"}\n')
    assert main(["eval-batch", "--manifest", str(manifest), "--backend", "cpp"]) == 2
    assert "not a manifest row" in capsys.readouterr().err


def test_version_via_module_entry_point():
    done = subprocess.run([sys.executable, "-m", "kevin", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("kevin ")


def test_eval_config_rejects_bad_values():
    from kevin.errors import UsageError
    from kevin.evaluator.evaluate import EvalConfig

    with pytest.raises(UsageError, match="backend"):
        EvalConfig(backend="opencl")
    with pytest.raises(UsageError, match="trials"):
        EvalConfig(trials=0)
    with pytest.raises(UsageError, match="device_slots"):
        EvalConfig(device_slots=0)


def test_device_slots_flag_is_one_line_exit_2(tmp_path, capsys):
    problem = tmp_path / "p.py"
    problem.write_text("x = 1\n")
    code = main(["eval", str(problem), str(problem), "--backend", "cpp", "--device-slots", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "device_slots must be at least 1" in err and len(err.splitlines()) == 1


def test_a_flagged_verdict_prints_which_check_blocked_it(tmp_path, capsys, monkeypatch):
    from kevin.evaluator import commands
    from kevin.evaluator.result import EvalResult

    blocked = EvalResult(
        stage="ok", compiled=True, correct=True, speedup=0.3, runtime_ms=2.0, baseline_ms=0.6,
        flags=["extra_threads"], checks={"runner_threads": {"started": ["python"]}},
    )
    monkeypatch.setattr(commands, "evaluate", lambda *args: blocked)
    problem = tmp_path / "p.py"
    problem.write_text("x = 1\n")
    assert main(["eval", str(problem), str(problem), "--backend", "cpp"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("FLAGGED stage=ok speedup=0.300x") and lines[0].endswith("flags=extra_threads")
    assert lines[1:] == ['blocked: extra_threads (runner_threads.started=["python"])']


def test_result_json_round_trip():
    from kevin.evaluator.result import EvalResult

    result = EvalResult(stage="ok", compiled=True, correct=True, speedup=1.5, flags=["side_stream"])
    again = EvalResult.from_dict(json.loads(result.to_json()))
    assert again == result and not again.passed  # a blocking flag makes it unrewardable
    with pytest.raises(ValueError):
        EvalResult(stage="weird")
