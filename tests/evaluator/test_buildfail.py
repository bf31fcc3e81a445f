"""A failed fast build that is the candidate's own error skips torch's full build
(kevin.evaluator.buildfail). On the H200 (session 10) each such candidate paid 18-48 s for a full
build that failed again on the same line; a failure that a header could explain must still get
the full build, or an honest kernel would be scored as a compile error.

The unit tests read hand-written compiler outputs; the nvcc tests compile real candidates with the
light headers on this CPU machine (compile only) and go through the broker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp_extension
from test_broker_early_failure import DECLARATION, KERNEL, needs_nvcc  # the same candidate

from kevin.evaluator import buildfail, fastbuild, torchbuild
from kevin.evaluator.broker import OWN_ERROR, Broker

CUDA = """#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>
#define BLOCK 256
__global__ void k(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * BLOCK + threadIdx.x
    if (i < n) y[i] = x[i] * FLT_MAX;
    TORCH_CHECK(n > 0, "empty")
}
"""
OWN = {"main.cpp": range(2, 3), "cuda.cu": range(4, 10)}
RESERVED = frozenset({"TORCH_CHECK", "C10_HOST_DEVICE"})


def _edg(line: int, message: str, count: int = 1) -> str:
    return (
        "[2/3] /usr/local/cuda/bin/nvcc -I/x/lite -c /b/cuda.cu -o cuda.cuda.o\n"
        "FAILED: [code=2] cuda.cuda.o\n/usr/local/cuda/bin/nvcc -I/x/lite -c /b/cuda.cu\n"
        f"/b/cuda.cu({line}): error: {message}\n      some source echo with error in it\n          ^\n\n"
        f"{count} error{'s' if count > 1 else ''} detected in the compilation of \"/b/cuda.cu\".\n"
        "ninja: build stopped: subcommand failed.\n"
    )


@pytest.fixture
def build_dir(tmp_path):
    (tmp_path / "cuda.cu").write_text(CUDA)
    (tmp_path / "main.cpp").write_text("#include <torch/extension.h>\ntorch::Tensor run(torch::Tensor x);\n")
    return tmp_path


def test_a_syntax_error_on_the_candidates_plain_lines_is_its_own(build_dir):
    found = buildfail.own_error(_edg(6, 'expected a ";"'), build_dir, OWN, RESERVED)
    assert found == [buildfail.Diagnostic("cuda.cu", 6, 'expected a ";"')]


@pytest.mark.parametrize(
    ("output", "why"),
    [
        (_edg(7, 'expected a ";"'), "FLT_MAX: a C library macro the light headers may not include"),
        (_edg(8, 'expected a ";"'), "TORCH_CHECK: a macro the headers define"),
        (_edg(6, 'identifier "threadIdx" is undefined'), "names an identifier: a header may declare it"),
        (_edg(6, 'namespace "at" has no member "Half"'), "names a member"),
        (_edg(2, 'expected a ";"'), "the include lines are not the candidate's"),
        (_edg(6, 'expected a ";"', count=2), "nvcc counted an error this did not read"),
        (_edg(6, 'expected a ";"').replace("/b/cuda.cu(6)", "/x/lite/torch/types.h(6)"), "in a header"),
        ("ninja: build stopped: subcommand failed.\n", "nothing read: a link failure or a killed compiler"),
        ("kevin: build stopped after 120 s\n", "a timeout"),
        ("/b/main.cpp:3:1: error: expected ';' before '}' token\n", "main.cpp's binding block"),
        ("/b/main.cpp:1:10: fatal error: foo.h: No such file or directory\n", "a missing header"),
    ],
)
def test_anything_a_header_could_explain_goes_to_the_full_build(build_dir, output, why):
    assert buildfail.own_error(output, build_dir, OWN, RESERVED) is None, why


def test_a_constant_the_candidate_defines_itself_is_not_a_header_macro(build_dir):
    # Line 6 holds BLOCK, #defined on line 4 by the candidate: the same under both builds.
    assert buildfail.own_error(_edg(6, "expected an expression"), build_dir, OWN, RESERVED)


def test_host_compiler_syntax_errors_in_the_candidates_cpp_lines_are_its_own(build_dir):
    output = "/b/main.cpp:2:36: error: expected ';' at end of input\n"
    assert buildfail.own_error(output, build_dir, OWN, RESERVED)


def test_the_reserved_macros_are_torchs_and_the_light_headers():
    names = buildfail.reserved_macros()
    assert {"TORCH_CHECK", "C10_HOST_DEVICE", "AT_DISPATCH_FLOATING_TYPES"} <= names
    assert "twice_kernel" not in names


def test_own_lines_are_where_load_inline_puts_the_candidates_text():
    plan = fastbuild.plan(
        {"name": "x", "cpp_sources": "int f();\nint g();", "cuda_sources": ["a\nb", "c"], "functions": ["f"]}
    )
    lines = fastbuild.own_lines(plan)
    assert lines == {"main.cpp": range(2, 4), "cuda.cu": range(4, 7)}


def test_the_report_reads_as_the_full_builds_without_kevins_paths(tmp_path):
    staging, entry = tmp_path / "staging", tmp_path / "entry"
    output = _edg(6, 'expected a ";"').replace("/b/", f"{staging}/")
    text = buildfail.report(output, "ext", staging, entry)
    assert text.startswith("Error building extension 'ext': ")
    assert "/x/lite" not in text and str(staging) not in text
    assert f'{entry}/cuda.cu(6): error: expected a ";"' in text and "FAILED: [code=2] cuda.cuda.o" in text
    assert text.endswith("ninja: build stopped: subcommand failed.\n")


# -- real candidates: the light headers' nvcc output, through the broker --------------------------

@pytest.fixture
def fast_broker(tmp_path, monkeypatch):
    """build(name, cuda_sources) -> (reply, whether the full build ran). The shim is only linked,
    never reached by a failed compile; the full build is recorded, not run."""
    if cpp_extension.CUDA_HOME is None:  # a CPU torch: point its build-file writer at this toolkit
        home = Path(shutil.which("nvcc")).resolve().parent.parent
        if not (home / "include" / "cuda_runtime.h").exists():
            home = Path("/usr/local/cuda")
        monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(home))
    full_builds: list[str] = []

    def full_build(function, kwargs, directory, timeout, overrides, readable=()):
        full_builds.append(kwargs["name"])
        return False, "RuntimeError", f"Error building extension '{kwargs['name']}': the full build"

    monkeypatch.setattr(torchbuild, "run", full_build)
    monkeypatch.setattr(Broker, "_shim_library", lambda self: (Path("/nonexistent/shim.so"), "0" * 64))
    broker = Broker(tmp_path / "builds", device_arch="9.0", fast=True)

    def build(name, cuda_sources):
        before = len(full_builds)
        reply = broker.build(
            {"name": name, "cpp_sources": DECLARATION, "cuda_sources": cuda_sources, "functions": ["twice"]}
        )
        return reply, len(full_builds) > before

    return build


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize(
    "broken",
    [
        KERNEL.replace("threadIdx.x;", "threadIdx.x"),  # a missing ';'
        KERNEL.replace("+ threadIdx.x;", "+ 0.x;"),  # the RL policy's `0.x` (session 10)
        KERNEL.replace("out[i] = 2.0f * in[i];", 'out[i] = 2.0f * in[i]; const char* s = "open;'),
    ],
)
def test_a_syntax_error_fails_at_the_fast_build_without_the_full_build(fast_broker, broken):
    reply, full_build_ran = fast_broker("kevin_own_error", broken)
    assert not reply.ok and reply.blame == "candidate" and reply.error_type == "RuntimeError", reply
    assert not full_build_ran and reply.fallback == OWN_ERROR
    assert reply.error.startswith("Error building extension 'kevin_own_error': ")
    assert "cuda.cu(" in reply.error and "error" in reply.error and "native/lite" not in reply.error


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize(
    "outside",
    [
        # A torch function the light headers do not forward: only the full build can say.
        KERNEL.replace("auto out = torch::empty_like(x);", "auto out = torch::special_erfcx(x);"),
        # A syntax error beside a torch macro: the light headers' macro might be the cause.
        KERNEL.replace("auto out = torch::empty_like(x);", "TORCH_CHECK(x.is_cuda(), \"cuda\")\n    auto out = torch::empty_like(x);"),
    ],
)
def test_a_failure_a_header_could_explain_still_gets_the_full_build(fast_broker, outside):
    reply, full_build_ran = fast_broker("kevin_outside", outside)
    assert full_build_ran and reply.error.endswith("the full build"), reply


# -- undefined names: the candidate's own only when a probe with torch's headers agrees -----------

PLAIN = """#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
using namespace torch;
__global__ void k(const float* x, float* y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * scale;
    if (i < n) y[i] = helper(x[i]);
}
"""
PLAIN_OWN = {"main.cpp": range(2, 3), "cuda.cu": range(4, 11)}


class FakeProbe:
    def __init__(self, undeclared):
        self.undeclared = set(undeclared)
        self.calls = []

    def __call__(self, file, text, names):
        self.calls.append((file, text, list(names)))
        return self.undeclared & set(names)


def _plain_dir(tmp_path, text=PLAIN):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cuda.cu").write_text(text)
    (tmp_path / "main.cpp").write_text("#include <torch/extension.h>\ntorch::Tensor run(torch::Tensor x);\n")
    return tmp_path


def test_an_undefined_name_is_the_candidates_own_only_when_the_probe_finds_no_declaration(tmp_path):
    directory = _plain_dir(tmp_path)
    output = _edg(8, 'identifier "scale" is undefined')
    assert buildfail.own_error(output, directory, PLAIN_OWN, RESERVED) is None  # no probe: full build
    probe = FakeProbe({"scale"})
    found = buildfail.own_error(output, directory, PLAIN_OWN, RESERVED, probe)
    assert found == [buildfail.Diagnostic("cuda.cu", 8, 'identifier "scale" is undefined')]
    ((file, text, names),) = probe.calls
    assert file == "cuda.cu" and names == ["scale"]
    assert text.splitlines()[0] == "#include <cuda_fp16.h>" and "using namespace torch;" in text
    assert buildfail.own_error(output, directory, PLAIN_OWN, RESERVED, FakeProbe(set())) is None


def test_calls_conditionals_namespaces_and_bases_never_reach_the_probe(tmp_path):
    probe = FakeProbe({"helper", "scale"})
    call = _edg(9, 'identifier "helper" is undefined')  # ADL could find it in an argument's namespace
    assert buildfail.own_error(call, _plain_dir(tmp_path), PLAIN_OWN, RESERVED, probe) is None
    extras = ("#ifdef USE_FAST\n#endif", "namespace at { }", "struct A : B { };", "class C final : public D { };")
    for extra in (*extras, "#define CUB_IGNORE 1\n#include <cub/cub.cuh>"):
        directory = _plain_dir(tmp_path / str(len(extra)), PLAIN.replace("using namespace torch;", extra))
        output = _edg(8 if "\n" not in extra else 9, 'identifier "scale" is undefined')
        assert buildfail.own_error(output, directory, PLAIN_OWN, RESERVED, probe) is None, extra
    assert probe.calls == []


def test_a_probe_holds_the_full_builds_preamble_the_candidates_includes_and_usings():
    text = "#include <cuda_fp16.h>\nusing namespace torch;\nusing at::Tensor;\nusing T = float;\nint f() { return buf; }"
    source, lines = buildfail.probe_source("cuda.cu", text, ["part", "buf", "part"])
    rows = source.splitlines()
    assert rows[:3] == list(fastbuild.CUDA_PREAMBLE)
    assert rows[3:6] == ["#include <cuda_fp16.h>", "using namespace torch;", "using at::Tensor;"]
    assert lines == {7: "buf", 8: "part"} and "sizeof(buf)" in rows[6] and "sizeof(part)" in rows[7]
    main, _ = buildfail.probe_source("main.cpp", "", ["x"])
    assert main.splitlines()[0] == "#include <torch/extension.h>"


def test_a_probes_output_answers_per_name_or_not_at_all():
    lines = {5: "buf", 6: "kStrided", 7: "empty_like", 8: "part"}
    edg = (
        '/p/cuda.cu(5): error: identifier "buf" is undefined\n'
        '/p/cuda.cu(7): error: cannot determine which instance of overloaded function "empty_like" is intended\n'
        '/p/cuda.cu(8): error: identifier "part" is undefined\n3 errors detected in the compilation of "/p/cuda.cu".\n'
    )
    assert buildfail.probe_verdict(2, edg, "cuda.cu", lines) == {
        "buf": True, "kStrided": False, "empty_like": False, "part": True,
    }
    assert buildfail.probe_verdict(0, "", "cuda.cu", lines) == dict.fromkeys(lines.values(), False)
    elsewhere = '/p/cuda.cu(4): error: cannot open source file "x.h"\n' + edg
    assert buildfail.probe_verdict(2, elsewhere, "cuda.cu", lines) is None
    assert buildfail.probe_verdict(-9, edg, "cuda.cu", lines) is None  # killed: no answer
    assert buildfail.probe_verdict(1, "ninja: error: loading 'build.ninja'", "cuda.cu", lines) is None
    gcc = "/p/main.cpp:4:53: error: \u2018buf\u2019 was not declared in this scope; did you mean \u2018bufs\u2019?\n"
    assert buildfail.probe_verdict(1, gcc, "main.cpp", {4: "buf"}) == {"buf": True}


def test_the_broker_caches_decisive_answers_and_asks_again_after_an_undecided_probe(tmp_path, monkeypatch):
    compiles = []
    outputs = iter(
        [
            (-9, "kevin: build stopped after 900 s"),  # undecided: nothing kept
            (2, '/p/cuda.cu(5): error: identifier "buf" is undefined\n1 error detected in the compilation of "/p/cuda.cu".\n'),
            (0, ""),
        ]
    )

    def fake_compile(plan, file, source, directory, timeout=None, overrides=None, readable=()):
        compiles.append(source)
        return next(outputs)

    monkeypatch.setattr(fastbuild, "probe_compile", fake_compile)
    broker = Broker(tmp_path / "builds", device_arch="9.0", fast=True)
    plan = fastbuild.plan({"name": "p", "cpp_sources": DECLARATION, "cuda_sources": KERNEL, "functions": ["twice"]})
    text = "int f() { return buf + bar; }"
    probe = broker._probe(plan, tmp_path / "probe")
    assert probe("cuda.cu", text, ["bar", "buf"]) == set()
    assert probe("cuda.cu", text, ["bar", "buf"]) == {"buf"}  # bar (line 4) compiled: declared
    assert probe("cuda.cu", text, ["buf", "bar"]) == {"buf"}
    assert len(compiles) == 2, "the third answer came from the cache"
    other = broker._probe(plan, tmp_path / "probe")
    assert other("cuda.cu", "using namespace at;\n" + text, ["buf"]) is not None and len(compiles) == 3


@pytest.mark.slow
@needs_nvcc
def test_an_undeclared_variable_fails_at_the_fast_build_once_torchs_headers_agree(fast_broker):
    # s11's learning run: 27 of 37 failed builds were an undefined name (buf, part, warps), 45 s
    # each for a full build that failed again. The probe compiles torch's own preamble instead.
    reply, full_build_ran = fast_broker("kevin_undeclared", KERNEL.replace("2.0f * in[i];", "2.0f * in[i] * scale;"))
    assert not reply.ok and reply.blame == "candidate", reply
    assert not full_build_ran and reply.fallback == OWN_ERROR
    assert 'identifier "scale" is undefined' in reply.error


@pytest.mark.slow
@needs_nvcc
def test_a_name_only_torchs_headers_declare_still_gets_the_full_build(fast_broker):
    # kStrided (c10::kStrided, through `using namespace torch`) is not in the light headers.
    uses = KERNEL.replace("auto out = torch::empty_like(x);", "auto layout = kStrided;\n    auto out = torch::empty_like(x);")
    reply, full_build_ran = fast_broker("kevin_torch_name", "using namespace torch;\n" + uses)
    assert full_build_ran and reply.error.endswith("the full build"), reply
