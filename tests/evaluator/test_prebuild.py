"""kevin.evaluator.prebuild: the toolchain's shim and symbol-check reference built in the background
before the first evaluation (the H200 learning run's first held-out evaluation spent most of its
207-227 s on them, against 58-75 s for the later ones)."""

from __future__ import annotations

import time

import pytest

from kevin.evaluator import fastbuild
from kevin.evaluator.evaluate import EvalConfig
from kevin.evaluator.prebuild import Prebuild
from kevin.evaluator.service import EvaluationService
from kevin.train.config import EvaluatorConfig
from kevin.train.rollout import build_evaluator


@pytest.fixture
def fresh_toolchain(tmp_path, monkeypatch):
    """A toolchain folder of this test's own (conftest shares one across the suite)."""
    folder = tmp_path / "toolchain"
    monkeypatch.setenv(fastbuild.TOOLCHAIN_VARIABLE, str(folder))
    return folder


@pytest.mark.slow
def test_prepare_builds_the_shim_and_the_reference_before_any_evaluation(tmp_path, fresh_toolchain):
    service = EvaluationService(EvalConfig(backend="cpp", cache_dir=str(tmp_path / "cache")), max_in_flight=1)
    try:
        prebuild = service.prepare()
        assert service.prepare() is prebuild, "one build per service"
        ok, line = prebuild.result(timeout=800)
        assert ok, line
        assert line.startswith("kevin prebuild: ready in"), line
        assert list((fresh_toolchain / "shims").glob("*/.kevin-complete")), "the shim is built"
        assert list((fresh_toolchain / "symbols").glob("*/reference.json")), "the reference is recorded"
        assert service.submitted == 0
        # Built: a second one (what a worker's broker does first) only checks, in seconds.
        started = time.monotonic()
        ok, line = Prebuild(tmp_path / "cache" / "builds").result(timeout=300)
        assert ok, line
        assert time.monotonic() - started < 60
    finally:
        service.close()


def test_a_build_that_cannot_start_says_why_in_one_line(tmp_path, fresh_toolchain):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    ok, line = Prebuild(blocker / "builds").result(timeout=300)
    assert not ok
    assert line.startswith("kevin prebuild: failed:") and "\n" not in line, line


def test_close_ends_a_build_still_going(tmp_path, fresh_toolchain):
    service = EvaluationService(EvalConfig(backend="cpp", cache_dir=str(tmp_path / "cache")), max_in_flight=1)
    prebuild = service.prepare()
    time.sleep(1)
    service.close()
    assert prebuild.process.returncode is not None
    assert not prebuild.workdir.exists()
    assert not list((fresh_toolchain / "shims").glob("*/.kevin-complete"))


def test_the_trainer_s_local_evaluator_starts_the_build_when_it_is_made(tmp_path, fresh_toolchain):
    service = build_evaluator(EvaluatorConfig(cache_dir=str(tmp_path / "cache")), "cpp")
    try:
        assert isinstance(service, EvaluationService)
        assert service.prebuild is not None and service.prebuild.process.args[-1] == str(
            tmp_path / "cache" / "builds"
        )
    finally:
        service.close()
