"""The bundled tasks (`kevin/tasks/bundled/tasks`) and their honest candidates (`cpp/`, `cuda/`, `triton/`).

Every task must follow the KernelBench convention and the size-knob convention the loader relies on
(a line exactly `SIZE = "small"`, a `SIZES` dict with "small" and "large"); its reference must be
cheap at the small size and its output must depend on its input. Every cpp candidate, built with
plain `load_inline`, must match its reference at atol = rtol = 1e-4 with the same seed (slow: one
C++ extension per task, built two at a time in background subprocesses). CUDA candidates cannot run
here: they are checked for shape only (they parse, define `ModelNew` with the reference's
constructor signature, build with `cuda_sources`); the `gpu` test runs them on a GPU. Triton
candidates, one per task, are checked here for their constructor signature (the gate and compile() in
tests/gate/test_triton.py); their `gpu` test runs each through the evaluator at both sizes.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

BUNDLED = Path(__file__).resolve().parents[2] / "kevin" / "tasks" / "bundled"
TASK_FILES = sorted((BUNDLED / "tasks").glob("[0-9][0-9]_*.py"))
TASK_NAMES = [path.stem for path in TASK_FILES]
SIZE_LINE = re.compile(r'^SIZE = "small"$', re.MULTILINE)
TOLERANCE = 1e-4
MAX_INPUT_BYTES = 2 * 1024**3


def load_source(path: Path, *, size: str = "small") -> types.ModuleType:
    """Executes a bundled file as a fresh module, with its size knob set the way the loader sets it."""
    source = path.read_text()
    if size != "small":
        source = SIZE_LINE.sub(f'SIZE = "{size}"', source, count=1)
    module = types.ModuleType(f"kevin_bundled_{path.parent.name}_{path.stem}")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def build_reference(task: types.ModuleType, seed: int):
    torch.manual_seed(seed)
    model = task.Model(*task.get_init_inputs())
    torch.manual_seed(seed + 1)
    inputs = task.get_inputs()
    return model, inputs


def init_signature(tree: ast.Module, class_name: str) -> tuple[list[str], int]:
    """(argument names after self, number of defaults) of `class_name.__init__` in a parsed file."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    names = [arg.arg for arg in item.args.args[1:]]
                    return names, len(item.args.defaults)
    raise AssertionError(f"no {class_name}.__init__ found")


def load_inline_keywords(tree: ast.Module) -> set[str]:
    keywords: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) == "load_inline"
        ):
            keywords.update(keyword.arg for keyword in node.keywords if keyword.arg)
    return keywords


def test_every_task_has_both_candidates_and_a_readme_line():
    assert len(TASK_NAMES) >= 10
    assert sorted(path.stem for path in (BUNDLED / "cpp").glob("*.py")) == TASK_NAMES
    assert sorted(path.stem for path in (BUNDLED / "cuda").glob("*.py")) == TASK_NAMES
    assert not (BUNDLED / "__init__.py").exists()
    readme = (BUNDLED / "README.md").read_text()
    for name in TASK_NAMES:
        assert f"`{name}`" in readme, f"README.md has no line for {name}"


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_NAMES)
def test_task_has_the_size_knob(path):
    assert len(SIZE_LINE.findall(path.read_text())) == 1, 'need exactly one line `SIZE = "small"`'
    task = load_source(path)
    assert task.SIZE == "small"
    assert set(task.SIZES) == {"small", "large"}
    assert set(task.SIZES["small"]) == set(task.SIZES["large"])
    assert load_source(path, size="large").SIZE == "large"


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_NAMES)
def test_task_reference_runs_small_and_depends_on_its_input(path):
    task = load_source(path)
    model, inputs = build_reference(task, seed=0)
    assert inputs and all(x.device.type == "cpu" for x in inputs)
    assert all(x.dtype == torch.float32 or not x.is_floating_point() for x in inputs)
    with torch.no_grad():
        model(*inputs)  # the first call pays one-off set-up (oneDNN's for a convolution)
        start = time.perf_counter()
        output = model(*inputs)
        elapsed_s = time.perf_counter() - start
        assert elapsed_s < 1.0, f"small reference took {elapsed_s:.2f} s"
        assert torch.isfinite(output).all()
        assert output.abs().max() > 1e-3
        _, other_inputs = build_reference(task, seed=100)
        other = model(*other_inputs)
    assert not torch.allclose(output, other, atol=TOLERANCE, rtol=TOLERANCE)
    # Deterministic given the seed: same seed, same parameters and inputs.
    model_again, inputs_again = build_reference(task, seed=0)
    for first, second in zip(inputs, inputs_again, strict=True):
        assert torch.equal(first, second)
    for first, second in zip(model.parameters(), model_again.parameters(), strict=True):
        assert torch.equal(first, second)


@pytest.mark.parametrize("path", TASK_FILES, ids=TASK_NAMES)
def test_task_large_size_fits(path):
    """At the large size (on the meta device: no memory, no compute) inputs stay under 2 GiB."""
    task = load_source(path, size="large")
    with torch.device("meta"):
        model = task.Model(*task.get_init_inputs())
        inputs = task.get_inputs()
        output = model(*inputs)
    total_bytes = sum(x.numel() * x.element_size() for x in inputs)
    assert total_bytes < MAX_INPUT_BYTES
    assert output.numel() > 0
    small_bytes = sum(x.numel() * x.element_size() for x in load_source(path).get_inputs())
    assert total_bytes > small_bytes


@pytest.mark.parametrize("kind", ["cpp", "cuda"])
@pytest.mark.parametrize("name", TASK_NAMES)
def test_candidate_has_the_reference_constructor(name, kind):
    task_tree = ast.parse((BUNDLED / "tasks" / f"{name}.py").read_text())
    candidate_tree = ast.parse((BUNDLED / kind / f"{name}.py").read_text())
    assert init_signature(candidate_tree, "ModelNew") == init_signature(task_tree, "Model")
    keywords = load_inline_keywords(candidate_tree)
    assert {"name", "cpp_sources", "functions"} <= keywords
    if kind == "cuda":
        assert "cuda_sources" in keywords
    else:
        assert "cuda_sources" not in keywords


BUILD_TESTS = {
    "test_cpp_candidate_matches_reference": "cpp",
    "test_cuda_candidate_matches_reference_on_gpu": "cuda",
}


@pytest.fixture(scope="session")
def candidate_builds(request):
    """Starts building every selected candidate in background subprocesses, into a private extensions dir.

    Each test waits only for its own build, then imports its candidate with the same plain
    `load_inline` call, which finds the build up to date; on 2 cores two builds at a time nearly halve
    the wall time. A failed prebuild is not an error here: the test's own import repeats the build and
    reports it. The directory comes from `tempfile`, not `tmp_path`: pytest prunes old base temp dirs,
    also while another pytest session still uses them.
    """
    selected = [
        (BUILD_TESTS[item.originalname], item.callspec.params["name"])
        for item in request.session.items
        if getattr(item, "originalname", "") in BUILD_TESTS and item.get_closest_marker("skip") is None
    ]
    extensions_dir = tempfile.mkdtemp(prefix="kevin-bundled-extensions-")
    previous = os.environ.get("TORCH_EXTENSIONS_DIR")
    os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir
    script = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('candidate', sys.argv[1])\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    )

    def build(kind: str, name: str) -> None:
        subprocess.run(
            [sys.executable, "-c", script, str(BUNDLED / kind / f"{name}.py")],
            env=os.environ.copy(),
            capture_output=True,
            timeout=1800,
            check=False,
        )

    pool = ThreadPoolExecutor(max_workers=max(2, min(12, (os.cpu_count() or 2) // 2)))
    futures = {key: pool.submit(build, *key) for key in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)
    shutil.rmtree(extensions_dir, ignore_errors=True)
    if previous is None:
        os.environ.pop("TORCH_EXTENSIONS_DIR", None)
    else:
        os.environ["TORCH_EXTENSIONS_DIR"] = previous


@pytest.fixture
def fp32_without_tf32():
    """The references run in true fp32 on a GPU; the flags are restored for the tests that follow."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def assert_candidate_matches(kind: str, name: str, builds: dict, device: str) -> None:
    if (kind, name) in builds:
        builds[kind, name].result()
    task = load_source(BUNDLED / "tasks" / f"{name}.py")
    candidate = load_source(BUNDLED / kind / f"{name}.py")
    for seed in (0, 1):
        reference, inputs = build_reference(task, seed)
        torch.manual_seed(seed)
        model_new = candidate.ModelNew(*task.get_init_inputs())
        # Same seed, same parameters: the candidate owns them the way KernelBench solutions do.
        reference_params = list(reference.parameters())
        candidate_params = list(model_new.parameters())
        assert len(reference_params) == len(candidate_params)
        for expected, got in zip(reference_params, candidate_params, strict=True):
            assert torch.equal(expected, got)
        reference, model_new = reference.to(device), model_new.to(device)
        inputs = [x.to(device) for x in inputs]
        with torch.no_grad():
            got = model_new(*[x.clone() for x in inputs])
            expected = reference(*[x.clone() for x in inputs])
        assert got.shape == expected.shape and got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("name", TASK_NAMES)
def test_cpp_candidate_matches_reference(name, candidate_builds):
    assert_candidate_matches("cpp", name, candidate_builds, "cpu")


TRITON_NAMES = sorted(path.stem for path in (BUNDLED / "triton").glob("[0-9][0-9]_*.py"))


def test_triton_candidates_name_tasks_and_have_the_reference_constructor():
    assert TRITON_NAMES == TASK_NAMES  # one per task, so the gpu test below evaluates every task
    for name in TRITON_NAMES:
        task_tree = ast.parse((BUNDLED / "tasks" / f"{name}.py").read_text())
        candidate_tree = ast.parse((BUNDLED / "triton" / f"{name}.py").read_text())
        assert init_signature(candidate_tree, "ModelNew") == init_signature(task_tree, "Model")


def jit_globals_not_made_constexpr(tree: ast.Module) -> list[str]:
    """Module-level names a @triton.jit body reads that are not bound by a `tl.constexpr(...)` call:
    Triton 3 refuses them at the kernel's first launch ("Cannot access global variable ... from
    within @jit'ed function"), the annotated form `X: tl.constexpr = 1.0` included."""
    bound: dict[str, bool] = {}
    for statement in tree.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        if isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        for target in targets:
            if isinstance(target, ast.Name):
                value = statement.value
                made = (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "constexpr"
                    and isinstance(statement, ast.Assign)
                )
                bound[target.id] = bound.get(target.id, True) and made
    found = []
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        if not any("jit" in ast.unparse(decorator) for decorator in function.decorator_list):
            continue
        local = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and node.id not in local and bound.get(node.id) is False:
                found.append(f"{function.name} reads {node.id}")
    return sorted(set(found))


def test_the_constexpr_rule_finds_what_triton_refused_on_the_h200():
    """Session 22: 01_gelu_tanh's `SQRT_2_OVER_PI: tl.constexpr = ...` failed both sizes at the first
    launch; a plain literal global fails the same way."""
    kernel = "@triton.jit\ndef k(x_ptr):\n    tl.store(x_ptr, {name})\n"
    for binding in ("C: tl.constexpr = 0.5", "C = 0.5"):
        assert jit_globals_not_made_constexpr(ast.parse(binding + "\n" + kernel.format(name="C"))) == ["k reads C"]
    assert jit_globals_not_made_constexpr(ast.parse("C = tl.constexpr(0.5)\n" + kernel.format(name="C"))) == []


@pytest.mark.parametrize("name", TRITON_NAMES)
def test_triton_candidates_read_only_constexpr_globals_in_their_kernels(name):
    tree = ast.parse((BUNDLED / "triton" / f"{name}.py").read_text())
    assert jit_globals_not_made_constexpr(tree) == []


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("name", TRITON_NAMES)
def test_triton_candidate_passes_the_evaluator_on_gpu(name, size, tmp_path):
    """Through the whole evaluator with the triton back end: gate, runner (Triton compiling into the
    job's own cache under its confinement), correctness trials, trace, timing."""
    pytest.importorskip("triton")
    from kevin.evaluator.evaluate import EvalConfig, evaluate
    from kevin.tasks import Task

    source = (BUNDLED / "tasks" / f"{name}.py").read_text()
    if size != "small":
        source = SIZE_LINE.sub(f'SIZE = "{size}"', source, count=1)
    task = Task.from_source(source, id=f"{name}-{size}", name=name)
    config = EvalConfig(backend="triton", cache_dir=str(tmp_path), baseline_cache=False)
    result = evaluate(task, (BUNDLED / "triton" / f"{name}.py").read_text(), config)
    if not (result.stage == "ok" and result.correct and result.passed):
        # pytest.fail, not an assert message: pytest cuts those short, and the GPU session's first
        # run (s15) lost the runner's traceback so ("...triton/runtime/jit.py", li...).
        pytest.fail(
            f"{name} {size}: {result.explain()}\nstage {result.stage}, flags {result.flags}\nerror:\n{result.error}\n"
            f"log (tail):\n{result.log[-4000:]}",
            pytrace=False,
        )
    print(
        f"{name} {size}: speedup {result.speedup:.3f} runtime {result.runtime_ms:.4g} ms flags {result.flags}"
    )


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", TASK_NAMES)
def test_cuda_candidate_matches_reference_on_gpu(name, candidate_builds, fp32_without_tf32):
    assert_candidate_matches("cuda", name, candidate_builds, "cuda")
