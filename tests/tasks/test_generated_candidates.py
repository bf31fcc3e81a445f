"""The honest cuda candidates for generated tasks (kevin/tasks/bundled/generated, issue #18).

Each candidate is pinned to its task by number, draw and operator sequence, so a change of the
generator that would give its file name another task fails here rather than on the GPU. Validating
the whole set at the large size takes minutes on a CPU, so the set is drawn without validation, only
as far as the last candidate (attempts are drawn in order: the first tasks of a short set are those
of `--n 100`), and validation's part is replayed: the draws it dropped in the README's full run are
validated again (they must still be dropped) and left out, which numbers the rest as that run did.
CUDA cannot run here: the candidates are checked for their parameters (extension stubbed), the static
gate and an nvcc compile of their fast-build sources; the `gpu` test runs them through the evaluator.
"""

from __future__ import annotations

import ast
import shutil
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from kevin.gate import check_source
from kevin.tasks.generate import GenerateOptions, generate_set, validate_candidates

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / "kevin" / "tasks" / "bundled" / "generated"
SEED, SIZE = 0, "large"
CANDIDATES = {
    "0002_Matmul_LayerNorm_BiasAdd_Mish": ("L0_2", "0:1", ("Matmul", "LayerNorm", "BiasAdd", "Mish")),
    "0004_BMM_BiasAdd_Clamp_ELU_Add_Multiply": (
        "L0_4",
        "0:3",
        ("BMM", "BiasAdd", "Clamp", "ELU", "Add", "Multiply"),
    ),
    "0092_Gemm_Clamp_BiasAdd_ReLU_HardSwish_Softmax": (
        "L0_92",
        "0:93",
        ("Gemm", "Clamp", "BiasAdd", "ReLU", "HardSwish", "Softmax"),
    ),
}
"""Candidate file stem -> (task id, draw `seed:attempt`, operator sequence) in the seed-0 large set."""
NAMES = sorted(CANDIDATES)
DROPPED = ("0:54", "0:56")
"""Draws that `kevin tasks generate --n 100 --seed 0 --size large` drops at validation (degenerate by
construction: ConvTranspose2d_Max_BiasAdd_Sum_Clamp, Conv2d_LayerNorm_Divide_GlobalAvgPool_...)."""

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("ninja") is None, reason="needs nvcc and ninja"
)


@pytest.fixture(scope="module")
def drawn() -> list:
    """The seed-0 large set without validation, up to the last candidate with the dropped draws."""
    last = max(int(task_id.removeprefix("L0_")) for task_id, _, _ in CANDIDATES.values())
    options = GenerateOptions(n=last + len(DROPPED), seed=SEED, size=SIZE, validate=False)
    return generate_set(options)["tasks"]


@pytest.fixture(scope="module")
def generated(drawn) -> dict:
    """Task id -> GeneratedTask, numbered as in the validated set: the dropped draws left out."""
    kept = [task for task in drawn if f"{task.seed}:{task.attempt}" not in DROPPED]
    return {task.task_id: task for task in (replace(t, number=i + 1) for i, t in enumerate(kept))}


def _run(source: str, path: Path) -> types.ModuleType:
    module = types.ModuleType(f"kevin_generated_{path.stem}")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def _forward_arguments(source: str, class_name: str) -> list[str]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return [arg.arg for arg in item.args.args[1:]]
    raise AssertionError(f"no {class_name}.forward")


def test_the_folder_holds_exactly_the_pinned_candidates_and_the_readme_names_them():
    assert sorted(path.stem for path in GENERATED.glob("*.py")) == NAMES
    assert not (GENERATED / "__init__.py").exists()
    readme = (GENERATED / "README.md").read_text()
    assert f"--n 100 --seed {SEED} --size {SIZE}" in readme
    for name, (task_id, draw, ops) in CANDIDATES.items():
        assert f"`{name}` | `{task_id}` | `{draw}` | {' -> '.join(ops)} |" in readme, name


def test_validation_still_drops_the_draws_the_full_run_dropped(drawn):
    dropped_draws = [task for task in drawn if f"{task.seed}:{task.attempt}" in DROPPED]
    assert len(dropped_draws) == len(DROPPED)
    options = GenerateOptions(n=len(DROPPED), seed=SEED, size=SIZE)
    kept, dropped = validate_candidates(dropped_draws, options)
    assert kept == [] and all(why.startswith("degenerate:") for _, why in dropped), dropped


@pytest.mark.parametrize("name", NAMES)
def test_each_candidates_task_is_still_drawn_with_the_same_operators(name, generated):
    task_id, draw, ops = CANDIDATES[name]
    task = generated[task_id]
    assert task.filename == f"{name}.py"
    assert (f"{task.seed}:{task.attempt}", task.ops) == (draw, ops)
    assert task.manifest_entry()["ops"] == list(ops)


@pytest.mark.parametrize("name", NAMES)
def test_each_candidate_owns_the_tasks_parameters(name, generated, monkeypatch):
    """With the extension stubbed (nothing is built), ModelNew takes the task's constructor and
    forward arguments and, seed for seed, gets the very parameters Model gets."""
    path = GENERATED / f"{name}.py"
    candidate_source = path.read_text()
    monkeypatch.setattr(
        cpp_extension,
        "load_inline",
        lambda **kwargs: types.SimpleNamespace(**dict.fromkeys(kwargs["functions"])),
    )
    candidate = _run(candidate_source, path)
    task_source = generated[CANDIDATES[name][0]].source()
    task = _run(task_source, path.with_name("task.py"))
    assert _forward_arguments(candidate_source, "ModelNew") == _forward_arguments(task_source, "Model")
    for seed in (0, 1):
        torch.manual_seed(seed)
        reference = task.Model(*task.get_init_inputs())
        torch.manual_seed(seed)
        model_new = candidate.ModelNew(*task.get_init_inputs())
        expected, got = dict(reference.named_parameters()), dict(model_new.named_parameters())
        assert list(expected) == list(got)
        for key, value in expected.items():
            assert torch.equal(value, got[key]), key


@pytest.mark.parametrize("name", NAMES)
def test_each_candidate_passes_the_static_gate_for_cuda(name):
    report = check_source((GENERATED / f"{name}.py").read_text(), "cuda")
    assert report.ok, report.summary()


@needs_nvcc
@pytest.mark.parametrize("name", NAMES)
def test_each_candidate_compiles_with_nvcc(name, tmp_path, monkeypatch):
    """bench/build_coverage.py's check: main.cpp and cuda.cu as the evaluator's fast build writes
    them, compiled against the light headers for sm_90a (TORCH_CUDA_ARCH_LIST unless set); not linked."""
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    import build_coverage

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", cpp_extension.CUDA_HOME)  # restored afterwards
    build_coverage._cuda_home()
    candidate = build_coverage.Candidate("generated", name, (GENERATED / f"{name}.py").read_text())
    outcome = build_coverage.check(candidate, tmp_path, build_coverage._lite_digest(), timeout_s=300)
    assert (outcome.status, outcome.reason) == ("fast", "")


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [None, 200])
@pytest.mark.parametrize("name", NAMES)
def test_each_candidate_passes_the_evaluator_on_gpu(name, batch_size, generated, tmp_path):
    """Through the whole evaluator with the cuda back end: gate, build, correctness trials, the
    trace (library_kernels), timing. At the set's batch (8), and at 200 rows, which is not a multiple
    of the GEMM's 128-row tile, as a `--min-ms` scale-up would make it."""
    from kevin.evaluator.evaluate import EvalConfig, evaluate

    task = generated[CANDIDATES[name][0]]
    if batch_size is not None:
        task = replace(task, batch_size=batch_size)
    config = EvalConfig(backend="cuda", cache_dir=str(tmp_path), baseline_cache=False)
    result = evaluate(task.as_task(), (GENERATED / f"{name}.py").read_text(), config)
    assert result.stage == "ok" and result.correct and result.passed, (
        result.explain(),
        result.error,
        result.flags,
        result.log[-2000:],
    )
    print(
        f"{name} batch {task.batch_size}: speedup {result.speedup:.3f} runtime {result.runtime_ms:.4g} ms "
        f"flags {result.flags}"
    )
