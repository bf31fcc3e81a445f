"""The static gate (kevin.gate): the honest corpus is accepted, every cheat is rejected with the
expected rule on the line that cheats, and the CLI keeps its exit codes. Parsing only, no builds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kevin import gate as checks
from kevin.cli import main
from kevin.errors import UsageError
from kevin.gate import RULES, CheckPolicy, CheckReport, check_file, check_source
from kevin.gate import policy as policy_module

DATA = Path(__file__).parents[1] / "data" / "static"
HONEST = sorted((DATA / "honest").glob("*.py"))
CHEATS = sorted((DATA / "cheat").glob("*.py"))
BUNDLED = sorted((Path(checks.__file__).parents[1] / "tasks" / "bundled").glob("*/*.py"))
CHEAT_MARK = "# <-- cheat"


def header(path: Path) -> dict[str, str]:
    """`# key: value` lines at the top of a corpus file."""
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# ") or ":" not in line:
            break
        key, value = line[2:].split(":", 1)
        fields[key.strip()] = value.strip()
    return fields


def test_corpus_is_big_enough():
    backends = {header(p)["backend"] for p in HONEST}
    assert len(HONEST) >= 8 and backends == {"cuda", "cpp", "triton"}
    assert len(CHEATS) >= 16


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_candidates_are_accepted(path):
    report = check_file(path, header(path)["backend"])
    assert report.ok, report.summary()


@pytest.mark.parametrize("path", CHEATS, ids=lambda p: p.stem)
def test_cheats_are_rejected_with_rule_and_line(path):
    fields = header(path)
    rule = fields["expect"]
    assert rule in RULES
    marked = [i for i, line in enumerate(path.read_text().splitlines(), 1) if CHEAT_MARK in line]
    assert marked, f"{path.name} marks no line with {CHEAT_MARK!r}"
    report = check_file(path, fields["backend"])
    assert not report.ok
    assert any(v.rule == rule and v.line in marked for v in report.violations), report.summary()


@pytest.mark.parametrize(
    "path",
    [p for p in BUNDLED if p.parent.name in checks.BACKENDS],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_bundled_honest_candidates_are_accepted(path):
    report = check_file(path, path.parent.name)
    assert report.ok, report.summary()


def test_kernelbench_references_posing_as_candidates_are_rejected(kernelbench):
    """The reference itself, renamed ModelNew, is the laziest cheat: every one must be rejected for
    framework compute (and the gate must not crash on any real model file)."""
    files = sorted(kernelbench.glob("level*/*.py"))
    assert files
    for path in files:
        source = (
            path.read_text()
            .replace("class Model(", "class ModelNew(")
            .replace("super(Model,", "super(ModelNew,")
        )
        report = check_source(source, "cuda")
        assert "framework-compute" in report.rules, f"{path.name}: {report.summary()}"


# -- small cases, one mechanism each ---------------------------------------------------------------

PRELUDE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = """
__global__ void k(const float* x, float* y, int n) { }
torch::Tensor f(torch::Tensor x) {
    auto y = torch::empty_like(x);
    k<<<1, 1>>>(x.data_ptr<float>(), y.data_ptr<float>(), 1);
    return y;
}
"""
ext = load_inline(name="e", cpp_sources="torch::Tensor f(torch::Tensor x);", cuda_sources=CUDA, functions=["f"])
'''


def candidate(forward_body: str, extra: str = "", init: str = "") -> str:
    init_block = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return f"{PRELUDE}\n{extra}\nclass ModelNew(nn.Module):\n{init_block}    def forward(self, x):\n{forward_body}\n"


def rules(source: str, backend: str = "cuda") -> list[str]:
    return check_source(source, backend).rules


def test_text_in_comments_strings_and_docstrings_never_triggers():
    body = '        """torch.matmul(x, w), F.relu, Model, exec("...")"""\n'
    body += "        # torch.relu(x) @ w would be the reference\n"
    body += '        note = "torch.matmul(x, x) and Model"\n'
    body += "        return ext.f(x)"
    assert rules(candidate(body)) == []


@pytest.mark.parametrize(
    "body, extra",
    [
        ("        return ext.f(torch.matmul(x, x))", ""),
        ("        return ext.f(T.bmm(x, x))", "import torch as T"),
        ("        return ext.f(G.softmax(x, -1))", "import torch.nn.functional as G"),
        ("        return ext.f(r(x))", "from torch import relu as r"),
        ("        return ext.f(x.mm(x))", ""),
        ("        return ext.f(x).relu_()", ""),
        ("        return ext.f(x @ x)", ""),
        ("        y = ext.f(x)\n        y *= 2\n        return y", ""),
        ("        return ext.f(torch.conv2d(x, x))", ""),
        ("        return ext.f(getattr(torch, 'tanh')(x))", ""),
        ("        return ext.f(mm(x, x))", "mm = torch.matmul"),
        ("        return ext.f(OPS[0](x))", "OPS = [torch.sigmoid]"),
    ],
)
def test_framework_compute_is_followed_through_aliases(body, extra):
    assert "framework-compute" in rules(candidate(body, extra))


def test_allocation_views_and_queries_are_allowed():
    body = (
        "        n, c = x.shape[0], x.size(1)\n"
        "        y = torch.empty((n, c), device=x.device, dtype=x.dtype)\n"
        "        z = torch.zeros_like(x)\n"
        "        x = x.contiguous().view(n, -1).permute(1, 0).transpose(0, 1).unsqueeze(0).squeeze(0)\n"
        "        blocks = (x.numel() + 255) // 256\n"
        "        assert x.is_contiguous() and x.dim() == 2 and blocks > 0\n"
        "        return ext.f(x.float()).reshape(n, c)"
    )
    assert rules(candidate(body)) == []


def test_honest_idioms_from_real_candidates():
    """Habits of model-written candidates that must not be punished: an unused copy of the reference
    class, scalar arguments annotated as such, index and empty tensors built in forward."""
    copy = (
        "class Model(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n"
        "    def forward(self, x):\n        return torch.relu(x)\n"
    )
    assert rules(candidate("        return ext.f(x)", copy)) == []
    assert "reference-use" in rules(
        copy + candidate("        return ext.f(x)").replace("(nn.Module)", "(Model)")
    )
    scalar = candidate("        return ext.f(x, s * 2.0)").replace(
        "def forward(self, x):", "def forward(self, x, s: float):"
    )
    assert rules(scalar) == []
    body = (
        "        idx = torch.arange(x.size(0), device=x.device)\n        return ext.f(x, idx, torch.Tensor())"
    )
    assert rules(candidate(body)) == []


def test_layer_owning_weights_is_fine_but_calling_it_is_not():
    init = "        self.linear = nn.Linear(4, 4)"
    assert (
        rules(candidate("        return ext.f(x) if self.linear.weight is not None else ext.f(x)", init=init))
        == []
    )
    owned = candidate("        return ext.f(x, self.linear.weight, self.linear.bias)", init=init)
    assert rules(owned) == []
    assert "framework-compute" in rules(candidate("        return ext.f(self.linear(x))", init=init))


def test_helpers_between_forward_and_kernel_are_followed():
    helper = "def launch(t):\n    return ext.f(t.contiguous())\n"
    assert rules(candidate("        return launch(x)", helper)) == []
    cheat = "def launch(t):\n    return ext.f(t) * 2\n"
    assert "framework-compute" in rules(candidate("        return launch(x)", cheat))


def test_every_path_must_launch_but_optional_kernels_may_be_skipped():
    optional = "        y = ext.f(x)\n        if x.numel() > 4:\n            y = ext.f(y)\n        return y"
    assert rules(candidate(optional)) == []
    skipping = "        if x.numel() > 4:\n            return ext.f(x)\n        return x"
    report = check_source(candidate(skipping))
    assert report.rules == ["fallback"]


def test_reference_by_any_route_is_rejected():
    for body, extra in [
        ("        return Model()(x)", ""),
        ("        return ext.f(ref.Model()(x))", "import reference as ref"),
        ("        return ext.f(x)", "from reference import Model as M"),
    ]:
        assert "reference-use" in rules(candidate(body, extra))


@pytest.mark.parametrize(
    "extra, body, rule",
    [
        ("", "        return ext.f(x, self.table[x.long()])", "framework-compute"),
        ("ext.f = torch.relu", "        return ext.f(x)", "forward-hijack"),
        ("setattr(ext, 'f', torch.relu)", "        return ext.f(x)", "forward-hijack"),
        (
            "class Base(nn.Module):\n    def __call__(self, x):\n        return torch.relu(x)",
            None,
            "forward-hijack",
        ),
        ("torch.backends.cudnn.allow_tf32 = True", "        return ext.f(x)", "global-state"),
        ("import threading", "        return ext.f(x)", "concurrency"),
        ("import torchvision", "        return ext.f(x)", "disallowed-import"),
        ("import gc", "        return ext.f(x)", "introspection"),
        ("", "        return ext.f(object.__getattribute__(torch, 'relu')(x))", "dynamic-code"),
    ],
)
def test_whole_file_rules(extra, body, rule):
    if body is None:  # ModelNew inherits from the local Base
        source = (
            f"{PRELUDE}\n{extra}\nclass ModelNew(Base):\n    def forward(self, x):\n        return ext.f(x)\n"
        )
    else:
        init = "        self.table = nn.Parameter(torch.randn(8))" if "table" in body else ""
        source = candidate(body, extra, init)
    assert rule in rules(source)


def test_parameter_defaults_are_followed():
    source = candidate("        return ext.f(x)").replace(
        "def forward(self, x):", "def forward(self, x, act=torch.relu):"
    )
    source = source.replace("return ext.f(x)", "return act(ext.f(x))")
    assert "framework-compute" in rules(source)


def native_candidate(cuda_body: str, header: str = "", build_kwargs: str = "") -> str:
    return (
        "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        f'CUDA = r"""{header}\n__global__ void k(float* y) {{ }}\n'
        "torch::Tensor f(torch::Tensor x) {\n"
        "    auto y = torch::empty_like(x);\n    k<<<1, 1>>>(y.data_ptr<float>());\n"
        f'    {cuda_body}\n    return y;\n}}\n"""\n'
        'ext = load_inline(name="e", cpp_sources="torch::Tensor f(torch::Tensor x);", cuda_sources=CUDA,\n'
        f'                  functions=["f"]{build_kwargs})\n'
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    )


@pytest.mark.parametrize(
    "body, header, build_kwargs, rule",
    [
        ("auto z = torch::matmul(x, x);", "", "", "native-framework-compute"),
        ("auto z = at::cuda::mm(x, x);", "", "", "native-framework-compute"),
        ("auto z = at::_softmax(x, 0, false);", "", "", "native-framework-compute"),
        ("auto z = x.mm(x).sum();", "", "", "native-framework-compute"),
        ("auto z = mm(x, x);", "using namespace at;", "", "native-framework-compute"),
        ("auto z = MM(x, x);", "#define MM at::matmul", "", "native-framework-compute"),
        ("cublasSgemm(h, CUBLAS_OP_N);", '#include "cublas_v2.h"', "", "native-framework-compute"),
        ("", "", ', extra_ldflags=["-lcublas"]', "native-framework-compute"),
        ('py::module_::import("torch");', "", "", "native-framework-compute"),
        ('void* h = dlopen("libx.so", 1);', "", "", "native-framework-compute"),
        # the interpreter the extension is loaded into: the C API, pybind11 objects, aliases
        ('PyObject* m = PySys_GetObject("modules");', "", "", "native-framework-compute"),
        ("Py_INCREF(Py_None);", "", "", "native-framework-compute"),
        ('py::globals()["compare"] = 0;', "", "", "native-framework-compute"),
        ("auto f = py::cpp_function([]() { return true; });", "", "", "native-framework-compute"),
        ('pybind11::module_ m; m.attr("compare") = 0;', "", "", "native-framework-compute"),
        ("auto g = q::globals();", "namespace q = pybind11;", "", "native-framework-compute"),
        ("auto g = globals();", "using namespace pybind11;", "", "native-framework-compute"),
        ("auto o = THPVariable_Wrap(x);", "", "", "native-framework-compute"),
        ("", '#include "/tmp/written_at_run_time.cuh"', "", "kernel-source-unverifiable"),
        ("", "", ', extra_include_paths=["/tmp"]', "kernel-source-unverifiable"),
    ],
)
def test_native_sources_are_read(body, header, build_kwargs, rule):
    assert rule in rules(native_candidate(body, header, build_kwargs))


def test_native_comments_strings_and_runtime_helpers_are_fine():
    body = (
        "// at::matmul and cublasSgemm would be cheating\n"
        '    const char* note = "torch::matmul";  /* x.mm(x) */\n'
        "    auto stream = at::cuda::getCurrentCUDAStream();\n"
        "    auto o = torch::empty({1}, torch::dtype(torch::kFloat32).device(x.device()));\n"
        '    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "f: bad input");'
    )
    assert (
        rules(native_candidate(body, "using namespace torch::indexing;", ', extra_cuda_cflags=["-O3"]')) == []
    )


def test_a_hand_written_binding_is_fine():
    header = "namespace py = pybind11;"
    body = "// PyTorch's pybind11 binding below\n"
    source = (
        native_candidate(body, header)
        .replace('functions=["f"]', "functions=None")
        .replace(
            'CUDA = r"""',
            'CUDA = r"""\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n'
            '    m.def("f", &f, "f", py::arg("x"), py::call_guard<py::gil_scoped_release>());\n}\n',
        )
    )
    assert rules(source) == []


def test_sources_injected_through_format_are_read():
    source = native_candidate("/*OP*/").replace("CUDA = r", 'OP = "auto z = at::matmul(x, x);"\nCUDA = r', 1)
    source = source.replace("cuda_sources=CUDA", 'cuda_sources=CUDA.replace("/*OP*/", "{op}").format(op=OP)')
    assert "native-framework-compute" in rules(source)


def test_exec_and_eval_are_rejected_anywhere():
    assert "dynamic-code" in rules(candidate("        return ext.f(x)", "exec('import torch')"))
    assert "dynamic-code" in rules(candidate("        return ext.f(eval('x'))"))


def test_backend_decides_which_kernels_count():
    source = candidate("        return ext.f(x)")
    assert rules(source, "cuda") == []
    assert rules(source, "triton") == ["no-custom-kernel"]
    assert rules(source, "cpp") == ["no-custom-kernel"]


def test_host_only_cuda_sources_are_not_a_kernel():
    source = (
        "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='h', cpp_sources='torch::Tensor g(torch::Tensor x);',\n"
        "                  cuda_sources='torch::Tensor g(torch::Tensor x) { return x; }', functions=['g'])\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.g(x)\n"
    )
    report = check_source(source, "cuda")
    assert report.rules == ["no-custom-kernel"]
    assert "__global__" in report.violations[0].message


def test_syntax_error_and_missing_class_are_violations_not_exceptions():
    assert check_source("def broken(:\n").rules == ["syntax"]
    assert check_source("import torch\n").rules == ["missing-model-new", "no-custom-kernel"]
    assert check_source("class ModelNew:\n    pass\n").rules == ["missing-model-new", "no-custom-kernel"]


def test_policy_is_configurable():
    source = candidate("        return ext.f(torch.matmul(x, x))")
    assert not check_source(source).ok
    relaxed = dataclasses.replace(checks.paper(), allowed_calls=policy_module.ALLOWED_CALLS | {"torch.matmul"})
    assert check_source(source, "cuda", relaxed).ok
    with pytest.raises(ValueError, match="kernel_kinds"):
        CheckPolicy(kernel_kinds={"cuda": ("opencl",)})
    with pytest.raises(UsageError, match="unknown backend"):
        check_source(source, "opencl")


def test_report_shape():
    report = check_source(candidate("        return ext.f(x @ x)"))
    assert isinstance(report, CheckReport) and not report.ok
    data = report.to_dict()
    assert set(data) == {"ok", "backend", "violations"}
    assert data["violations"] and set(data["violations"][0]) == {"rule", "line", "message"}
    assert "[framework-compute]" in report.summary()
    assert check_source(candidate("        return ext.f(x)")).summary().startswith("static check passed")


# -- the command -----------------------------------------------------------------------------------


def test_cli_help(capsys):
    try:
        code = main(["check", "--help"])
    except SystemExit as exc:  # argparse's own exit, where main does not catch it
        code = exc.code
    assert code == 0
    out = capsys.readouterr().out
    assert "--backend" in out and "--json" in out


def test_cli_exit_codes(capsys, tmp_path):
    honest = DATA / "honest" / "cuda_elementwise_add.py"
    cheat = DATA / "cheat" / "matmul_operator.py"
    assert main(["check", str(honest)]) == 0
    assert "accepted" in capsys.readouterr().out
    assert main(["check", str(cheat), "--backend", "cuda"]) == 1
    out = capsys.readouterr().out
    assert "rejected" in out and "[framework-compute]" in out
    assert main(["check", str(tmp_path / "missing.py")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["check", str(honest), "--backend", "opencl"]) == 2
    assert main(["check", str(tmp_path)]) == 2


def test_cli_json(capsys):
    cheat = DATA / "cheat" / "try_except_fallback.py"
    assert main(["check", str(cheat), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["backend"] == "cuda" and data["candidate"] == str(cheat)
    assert {"rule", "line", "message"} <= set(data["violations"][0])
    assert "fallback" in {v["rule"] for v in data["violations"]}
    honest = DATA / "honest" / "triton_softmax_helper.py"
    assert main(["check", str(honest), "--backend", "triton", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "candidate": str(honest),
        "ok": True,
        "backend": "triton",
        "violations": [],
    }


# -- failing closed --------------------------------------------------------------------------------


def test_a_gate_that_raises_rejects_the_candidate_and_blames_itself(monkeypatch):
    from kevin.gate import rules

    honest = candidate("        return ext.f(x)")
    assert check_source(honest).ok

    def broken(self):
        raise KeyError("a rule table lost an entry")

    monkeypatch.setattr(rules.Gate, "run", broken)
    report = check_source(honest)
    assert not report.ok and report.rules == ["gate-error"] and report.blame == "infrastructure"
    assert "KeyError" in report.summary() and "not the candidate's" in report.summary()


def test_a_gate_whose_rules_cannot_load_rejects_the_candidate(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "kevin.gate.rules", None)  # the next import of it fails
    report = check_source(candidate("        return ext.f(x)"))
    assert report.rules == ["gate-error"] and report.blame == "infrastructure"
    assert "kevin.gate.rules" in report.summary()


def test_an_evaluation_behind_a_broken_gate_stops_at_the_gate(monkeypatch):
    from kevin.evaluator.evaluate import EvalConfig, evaluate
    from kevin.gate import rules
    from kevin.tasks import Task

    def broken(self):
        raise RuntimeError("simulated bug in the gate")

    monkeypatch.setattr(rules.Gate, "run", broken)
    task = Task.from_source("class Model: pass\n", id="gate_broken", name="gate_broken")
    result = evaluate(task, candidate("        return ext.f(x)"), EvalConfig(backend="cpp"))
    assert result.stage == "static_check" and not result.passed and "gate-error" in result.error
    assert result.blame == "infrastructure"  # kevin's fault: a trainer drops the sample, no penalty
