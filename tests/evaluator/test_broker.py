"""kevin.evaluator.broker, kevin.evaluator.symbols and build.install_client: issue 13's build-cache
and native-code defences, attacked the way the security review attacked them (cpp back end).

Fast tests check requests and flags without building. The slow ones build: an honest candidate
through broker and client (a cache hit is fast and verified), the cache poisoning of issue 13
(attack 3) and a library replaced after its build, then each forbidden import (attacks 1, 2 and 4:
the Python C API by `__asm__` name, pthread_create, dlopen, syscall, a raw syscall instruction)
through the fast path and through torch's own pybind11 build.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from kevin.evaluator import build, symbols
from kevin.evaluator.broker import MANIFEST, Broker, flag_problems, normalize, toolchain_roots

DATA = Path(__file__).resolve().parents[1] / "data" / "isolation"
HONEST = (DATA / "cache_honest.cpp").read_text()
ATTACKER = (DATA / "cache_attacker.cpp").read_text()
IDENTITY = "torch::Tensor ident(torch::Tensor x) { return x; }"


def _request(**kwargs):
    bound = inspect.signature(cpp_extension.load_inline).bind(**kwargs)
    bound.apply_defaults()
    return {
        k: v
        for k, v in bound.arguments.items()
        if k not in ("build_directory", "verbose", "keep_intermediates")
    }


# -- fast: requests -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_, error_type, fragment",
    [
        (
            {"name": "x", "cpp_sources": "", "surprise": 1},
            "TypeError",
            "unexpected keyword argument 'surprise'",
        ),
        ({"cpp_sources": ""}, "TypeError", "missing required argument: 'name'"),
        ({"name": "../../evil", "cpp_sources": ""}, "ValueError", "C identifier"),
        ({"name": "x", "cpp_sources": 3}, "TypeError", "cpp_sources must be a string or a list of strings"),
        ({"name": "x", "cpp_sources": "", "extra_cflags": [["-O3"]]}, "TypeError", "extra_cflags"),
        ({"name": "x", "cpp_sources": "", "with_cuda": "yes"}, "TypeError", "with_cuda"),
        ({"name": "x", "cpp_sources": "", "functions": ["f;g"]}, "ValueError", "bad function name"),
        ({"name": "x", "cpp_sources": "x" * (5 << 20)}, "ValueError", "exceed"),
        ({"name": "x", "cpp_sources": "", "extra_cflags": ["-O3"] * 300}, "ValueError", "more than"),
        ({"name": "x", "cpp_sources": "", "sycl_sources": "int x;"}, "RuntimeError", "sycl"),
    ],
)
def test_requests_are_validated_before_anything_is_built(tmp_path, request_, error_type, fragment):
    reply = Broker(tmp_path / "builds", device_arch="").build(request_)
    assert not reply.ok and reply.error_type == error_type and fragment in reply.error
    assert reply.blame == "candidate"
    assert not (tmp_path / "builds" / ".staging").exists()


def test_normalize_makes_equivalent_calls_one_key(tmp_path):
    broker = Broker(tmp_path / "builds", device_arch="")
    a = normalize({"name": "x", "cpp_sources": "int f();", "functions": ["f"], "use_pch": True})
    b = normalize(_request(name="x", cpp_sources=["int f();"], functions={"f": "f"}))
    assert a == b and a["use_pch"] is False
    assert broker.key(a) == broker.key(b)
    assert broker.key(a) != broker.key({**a, "extra_cflags": ["-O3"]})
    assert broker.key(a) != Broker(tmp_path / "builds", device_arch="9.0").key(a)


# -- fast: flags ------------------------------------------------------------------------------------------

TORCH_INCLUDE = cpp_extension.include_paths("cpu")[0]
TORCH_LIB = cpp_extension.TORCH_LIB_PATH

REFUSED_FLAGS = [
    ("extra_cflags", ["-fplugin=/tmp/evil.so"], "compiler plugins"),
    ("extra_cflags", ["-fplugin-arg-evil-x=1"], "compiler plugins"),
    ("extra_cflags", ["-B/tmp/evil/"], "-B changes where the compiler finds its own programs"),
    ("extra_cflags", ["-B", "/tmp/evil"], "-B changes"),
    ("extra_cflags", ["-wrapper", "/tmp/evil"], "-wrapper runs"),
    ("extra_cflags", ["-specs=/tmp/evil.specs"], "spec files"),
    ("extra_cflags", ["--specs=/tmp/evil.specs"], "spec files"),
    ("extra_cflags", ["@/tmp/evil.rsp"], "response files"),
    ("extra_cflags", ["-I/tmp/evil"], "outside the toolchain"),
    ("extra_cflags", ["-isystem", "/home"], "outside the toolchain"),
    ("extra_cflags", ["-isystem/tmp"], "outside the toolchain"),
    ("extra_cflags", ["-iquote", "/etc"], "outside the toolchain"),
    ("extra_cflags", [f"-I{TORCH_INCLUDE}/../../../../../../tmp"], "outside the toolchain"),
    ("extra_cflags", ["-I../../other-entry"], "relative paths"),
    ("extra_cflags", ["-include", "/etc/passwd"], "pre-included files"),
    ("extra_cflags", ["-Wl,--wrap=malloc"], "-Wl, -Wa and -Wp pass options past the checks"),
    ("extra_cflags", ["-Wa,-adhln=/tmp/x"], "-Wl, -Wa and -Wp"),
    ("extra_cflags", ["-Xlinker", "--wrap=malloc"], "-Xlinker"),
    ("extra_cflags", ["-fopenmp"], "native threads"),
    ("extra_cflags", ["-fprofile-generate=/tmp/x"], "outside the build"),
    ("extra_cflags", ["-fuse-ld=/tmp/evil-ld"], "the linker and its plugins"),
    ("extra_cflags", ["-fmodule-mapper=|/tmp/evil"], "characters the shell or ninja would interpret"),
    ("extra_cflags", ["-fmodules-ts"], "C++ modules"),
    ("extra_cflags", ["-o", "/tmp/x.so"], "the build owns the compiler's outputs"),
    (
        "extra_cflags",
        ["-O3 -fplugin=/tmp/evil.so"],
        "compiler plugins",
    ),  # two flags in one item: the shell splits it
    (
        "extra_cflags",
        ["-O3\nrule evil\n  command = touch /tmp/pwned"],
        "characters the shell or ninja would interpret",
    ),
    ("extra_cflags", ["-O3;touch /tmp/pwned"], "characters the shell or ninja would interpret"),
    ("extra_cflags", ["-DX=$(touch /tmp/pwned)"], "characters the shell or ninja would interpret"),
    ("extra_cflags", ["--sysroot=/tmp"], "re-rooted include paths"),
    ("extra_cflags", ["-made-up-flag"], "not on kevin's list of compiler flags"),
    ("extra_cflags", ["-mfentry"], "not on kevin's list of compiler flags"),
    ("extra_cuda_cflags", ["-ccbin", "/tmp/evil-gcc"], "-ccbin chooses the host compiler"),
    ("extra_cuda_cflags", ["--compiler-bindir=/tmp/evil"], "-ccbin"),
    (
        "extra_cuda_cflags",
        ["-Xcompiler", "-fplugin=/tmp/evil.so"],
        "-Xcompiler: -fplugin=/tmp/evil.so: compiler plugins",
    ),
    ("extra_cuda_cflags", ["-Xcompiler=-O3,-B/tmp/evil"], "-Xcompiler: -B/tmp/evil: -B changes"),
    ("extra_cuda_cflags", ["--compiler-options", "-specs=/tmp/x"], "spec files"),
    ("extra_cuda_cflags", ["-Xcompiler", "-wrapper,/tmp/evil"], "-wrapper runs"),
    ("extra_cuda_cflags", ["-Xcompiler", "-Wl,-rpath,/tmp"], "-Wl, -Wa and -Wp"),
    ("extra_cuda_cflags", ["-Xcompiler", "-fopenmp"], "native threads"),
    ("extra_cuda_cflags", ["--options-file", "/tmp/opts"], "options files"),
    ("extra_cuda_cflags", ["-optf=/tmp/opts"], "options files"),
    ("extra_cuda_cflags", ["-Xlinker", "--wrap=malloc"], "passes options past the checks"),
    ("extra_cuda_cflags", ["-Xnvlink", "-x"], "passes options past the checks"),
    ("extra_cuda_cflags", ["--forward-unknown-to-host-compiler"], "passes options past the checks"),
    ("extra_cuda_cflags", ["-I/tmp/evil"], "outside the toolchain"),
    ("extra_cuda_cflags", ["-isystem", "/root"], "outside the toolchain"),
    ("extra_cuda_cflags", ["--pre-include", "/etc/passwd"], "pre-included files"),
    ("extra_cuda_cflags", ["-Xptxas", "--cubin-file=/tmp/x"], "not on kevin's list of ptxas options"),
    ("extra_cuda_cflags", ["--keep-dir", "/tmp"], "the build owns nvcc's modes"),
    ("extra_cuda_cflags", ["-arch=sm_90;touch"], "characters the shell or ninja would interpret"),
    ("extra_cuda_cflags", ["@/tmp/nvcc.rsp"], "response files"),
    ("extra_ldflags", ["-Wl,-rpath,/tmp/evil"], "run-time search path /tmp/evil: outside the toolchain"),
    ("extra_ldflags", ["-Wl,-rpath=/home/x"], "outside the toolchain"),
    ("extra_ldflags", ["-Wl,--wrap=malloc"], "not on kevin's list of linker options"),
    ("extra_ldflags", ["-Wl,-T,/tmp/evil.ld"], "not on kevin's list of linker options"),
    ("extra_ldflags", ["-Wl,@/tmp/evil.rsp"], "response files"),
    ("extra_ldflags", ["-Wl,--dynamic-linker=/tmp/evil"], "not on kevin's list of linker options"),
    ("extra_ldflags", ["-L/tmp/evil"], "outside the toolchain"),
    ("extra_ldflags", ["-L", "/home"], "outside the toolchain"),
    ("extra_ldflags", ["-lpython3.11"], "links a library kevin does not allow"),
    ("extra_ldflags", ["-ldl"], "links a library kevin does not allow"),
    ("extra_ldflags", ["-l:evil.so"], "links a library kevin does not allow"),
    ("extra_ldflags", ["/tmp/evil.so"], "linking a file by path"),
    ("extra_ldflags", ["-Xlinker", "-rpath=/tmp"], "-Xlinker"),
    ("extra_ldflags", ["-B/tmp/evil"], "-B changes"),
    ("extra_ldflags", ["-fuse-ld=gold"], "the linker and its plugins"),
    ("extra_ldflags", ["-fopenmp"], "native threads"),
    ("extra_ldflags", ["-static"], "kevin links the library itself"),
    ("extra_include_paths", ["/tmp"], "outside the toolchain"),
    ("extra_include_paths", ["/home/user/.ssh"], "outside the toolchain"),
    ("extra_include_paths", ["relative/include"], "relative paths"),
    ("extra_include_paths", [f"{TORCH_INCLUDE}/../../../../../../../etc"], "outside the toolchain"),
]


@pytest.mark.parametrize(
    "field, flags, fragment", REFUSED_FLAGS, ids=[f"{f}:{' '.join(v)[:40]}" for f, v, _ in REFUSED_FLAGS]
)
def test_each_forbidden_flag_is_refused_with_its_reason(tmp_path, field, flags, fragment):
    reply = Broker(tmp_path / "builds", device_arch="").build(
        {"name": "flags", "cpp_sources": "", field: flags}
    )
    assert not reply.ok and reply.blame == "candidate" and reply.error_type == "RuntimeError"
    assert reply.error.startswith(
        "Error building extension 'flags': kevin's build broker refuses these flags:"
    )
    assert fragment in reply.error, reply.error
    assert field in reply.error


def test_a_symlink_out_of_the_toolchain_is_followed_before_the_check(tmp_path):
    link = tmp_path / "looks-local"
    link.symlink_to("/tmp")
    roots = toolchain_roots([tmp_path / "trusted"])
    (tmp_path / "trusted").mkdir()
    problems = flag_problems(
        normalize({"name": "x", "cpp_sources": "", "extra_include_paths": [str(link)]}), roots
    )
    assert problems and "outside the toolchain" in problems[0]
    trusted = toolchain_roots([tmp_path / "trusted"])
    assert (
        flag_problems(
            normalize({"name": "x", "cpp_sources": "", "extra_include_paths": [str(tmp_path / "trusted")]}),
            trusted,
        )
        == []
    )


def test_the_flags_honest_candidates_use_are_accepted():
    request = normalize(
        {
            "name": "honest_flags",
            "cpp_sources": "",
            "extra_cflags": [
                "-O3",
                "-std=c++17",
                "-DNDEBUG",
                "-DTILE=32",
                "-Wall",
                "-Wno-unused-variable",
                "-march=native",
                "-ffast-math",
                "-fno-strict-aliasing",
                "-funroll-loops",
                "-g",
                "-fopenmp-simd",
                f"-I{TORCH_INCLUDE}",
                "-isystem",
                TORCH_INCLUDE,
                "-U",
                "FOO",
            ],
            "extra_cuda_cflags": [
                "-O3",
                "--use_fast_math",
                "-arch=sm_90",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode",
                "arch=compute_80,code=sm_80",
                "-Xptxas -O3",
                "-Xptxas=-v,-warn-spills",
                "--ptxas-options=-v",
                "-lineinfo",
                "--expt-relaxed-constexpr",
                "--extended-lambda",
                "-Xcompiler",
                "-O3",
                "-Xcompiler=-fPIC,-Wall",
                "-std=c++17",
                "--maxrregcount=64",
                "-DUSE_FAST=1",
                "-I" + TORCH_INCLUDE,
                "-Xcudafe",
                "--diag_suppress=177",
                "--ftz=true",
                "-w",
                "",
            ],
            "extra_ldflags": [
                "-lcublas",
                "-lcudart",
                f"-L{TORCH_LIB}",
                f"-Wl,-rpath,{TORCH_LIB}",
                "-Wl,--no-as-needed",
                "-Wl,-z,defs",
                "-lc10",
                "",
            ],
            "extra_include_paths": [TORCH_INCLUDE],
        }
    )
    assert flag_problems(request, toolchain_roots()) == []


# -- fast: replies, deny list ------------------------------------------------------------------------------


def test_a_reply_round_trips_and_malformed_replies_are_refused():
    reply = build.BuildReply(
        ok=True, name="x", kind="fast", path="/p/x.so", sha256="0" * 64, functions={"f": "T:T"}
    )
    assert build.BuildReply.from_dict(json.loads(json.dumps(reply.to_dict()))) == reply
    for bad in (
        {"ok": "yes"},
        {"ok": True, "kind": "evil"},
        {"ok": True, "kind": "fast", "functions": {"f": 1}},
        [],
        {},
    ):
        with pytest.raises(ValueError):
            build.BuildReply.from_dict(bad)


@pytest.mark.parametrize(
    "name",
    [
        "dlopen",
        "dlsym",
        "dlmopen",
        "dl_iterate_phdr",
        "pthread_create",
        "fork",
        "vfork",
        "clone",
        "clone3",
        "syscall",
        "execve",
        "execvp",
        "posix_spawnp",
        "system",
        "popen",
        "setpriority",
        "nice",
        "sched_setaffinity",
        "sched_setscheduler",
        "setns",
        "unshare",
        "ptrace",
        "prctl",
        "kill",
        "sigaction",
        "mprotect",
        "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
        "GOMP_parallel",
        "__libc_dlopen_mode",
        "_r_debug",
    ],
)
def test_the_deny_list_names_every_way_out_the_issue_lists(name):
    assert symbols.denied_reason(name) is not None


@pytest.mark.parametrize(
    "name",
    [
        "malloc",
        "memcpy",
        "pthread_mutex_lock",
        "pthread_once",
        "__libc_single_threaded",
        "__cxa_guard_acquire",
        "cudaLaunchKernel",
        "sqrtf",
        "kvl_copy",
        "getenv",
    ],
)
def test_the_deny_list_leaves_what_kernels_use(name):
    assert symbols.denied_reason(name) is None


# -- slow: building ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("broker") / "builds"


@pytest.fixture(scope="module")
def broker(cache_root):
    return Broker(cache_root, device_arch="")


@pytest.fixture
def client(broker):
    """Install the runner's load_inline (requests go straight to the broker); restored afterwards."""
    original = cpp_extension.load_inline
    log = build.BuildLog()
    replies: list[build.BuildReply] = []

    def request(arguments):
        json.dumps(arguments)  # what a runner sends must travel as JSON
        reply = broker.build(json.loads(json.dumps(arguments)))
        replies.append(reply)
        return json.loads(json.dumps(reply.to_dict()))

    build.install_client(request, log)
    try:
        yield log, replies
    finally:
        cpp_extension.load_inline = original


def _mapped(path: str) -> bool:
    return path in Path("/proc/self/maps").read_text()


@pytest.mark.slow
def test_an_honest_candidate_builds_and_loads_through_broker_and_client(client, monkeypatch):
    log, replies = client
    module = cpp_extension.load_inline(
        name="kevin_broker_honest", cpp_sources=HONEST, functions=["double_it"]
    )
    assert torch.equal(module.double_it(torch.arange(4.0)), torch.arange(4.0) * 2)
    first = replies[-1]
    assert first.ok and first.kind == "fast" and not first.cache_hit and first.fallback == ""
    assert Path(first.path).parent.name.startswith(
        "kevin_broker_honest-"
    ) and first.sha256 == build.sha256_file(Path(first.path))
    record = log.records[-1]
    assert record.fast and not record.cache_hit and record.error == "" and record.module is module
    manifest = json.loads((Path(first.path).parent / MANIFEST).read_text())
    assert manifest["sha256"] == first.sha256 and manifest["library"] == "kevin_broker_honest.so"

    checked = []
    real_verify = build._verify
    monkeypatch.setattr(
        build, "_verify", lambda path, sha, what: (checked.append(path), real_verify(path, sha, what))
    )
    started = time.perf_counter()
    again = cpp_extension.load_inline(name="kevin_broker_honest", cpp_sources=HONEST, functions=["double_it"])
    seconds = time.perf_counter() - started
    # A hit re-validates and re-hashes, no compiler: a second or two at most on a loaded 2-core VM
    # (0.74 s seen while other tests ran), against 20 s and more for a build.
    assert replies[-1].cache_hit and log.records[-1].cache_hit and seconds < 3.0, seconds
    assert checked == [Path(first.path)]  # the hit was verified by the client
    assert torch.equal(again.double_it(torch.ones(3)), torch.full((3,), 2.0))


@pytest.mark.slow
def test_the_broker_builds_without_loading_what_it_built(broker):
    reply = broker.build(_request(name="kevin_broker_unloaded", cpp_sources=HONEST, functions=["double_it"]))
    assert reply.ok and not _mapped(reply.path)


@pytest.mark.slow
def test_builds_of_one_key_from_many_brokers_share_one_build(cache_root):
    request = _request(
        name="kevin_broker_shared", cpp_sources=HONEST, functions=["double_it"], extra_cflags=["-O1"]
    )
    replies = []
    threads = [
        threading.Thread(target=lambda: replies.append(Broker(cache_root, device_arch="").build(request)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.ok for r in replies) and len({r.path for r in replies}) == 1
    assert sorted(r.cache_hit for r in replies) == [False, True, True]
    assert not list((cache_root / ".staging").iterdir())


def _attack_entries(broker, honest_name):
    honest = broker.build(_request(name=honest_name, cpp_sources=HONEST, functions=["double_it"]))
    attacker = broker.build(
        _request(name="kevin_poison_attacker", cpp_sources=ATTACKER, functions=["double_it"])
    )
    assert honest.ok and attacker.ok
    return honest, attacker


@pytest.mark.slow
@pytest.mark.parametrize("tamper", ["traversal", "absolute", "symlink", "other_name"])
def test_a_poisoned_manifest_is_rejected_and_the_honest_candidate_loads_its_own_library(
    broker, client, tamper
):
    """Issue 13, attack 3: another entry's manifest pointed at the attacker's library."""
    log, replies = client
    name = f"kevin_poison_{tamper}"  # one name per case: a process loads a library path once
    honest, attacker = _attack_entries(broker, name)
    entry, evil = Path(honest.path).parent, Path(attacker.path)
    manifest = json.loads((entry / MANIFEST).read_text())
    if tamper == "traversal":
        manifest.update(library=f"../{evil.parent.name}/{evil.name}", sha256=attacker.sha256)
    elif tamper == "absolute":
        manifest.update(library=str(evil), sha256=attacker.sha256)
    elif tamper == "symlink":
        os.unlink(honest.path)
        os.symlink(evil, honest.path)
        manifest.update(sha256=attacker.sha256)
    else:
        manifest.update(name="kevin_poison_attacker", library=evil.name)
    (entry / MANIFEST).write_text(json.dumps(manifest))

    module = cpp_extension.load_inline(name=name, cpp_sources=HONEST, functions=["double_it"])
    reply = replies[-1]
    assert reply.ok and not reply.cache_hit and reply.discarded, reply
    assert Path(reply.path) == entry / f"{name}.so" and reply.sha256 != attacker.sha256
    assert torch.equal(module.double_it(torch.arange(5.0)), torch.arange(5.0) * 2)


@pytest.mark.slow
def test_a_library_replaced_after_its_build_fails_the_hash_check(broker, client):
    log, replies = client
    honest, attacker = _attack_entries(broker, "kevin_hash_honest")
    # In the cache: the broker re-hashes on a hit, throws the entry away and rebuilds it.
    shutil.copyfile(attacker.path, honest.path)
    reply = broker.build(_request(name="kevin_hash_honest", cpp_sources=HONEST, functions=["double_it"]))
    assert reply.ok and not reply.cache_hit and "sha256" in reply.discarded
    assert build.sha256_file(Path(reply.path)) == reply.sha256 == honest.sha256
    # Between the reply and the load: the runner checks the hash itself and refuses to load.
    original = broker.build

    def swap_after_reply(arguments):
        answer = original(arguments)
        shutil.copyfile(attacker.path, answer.path)
        return answer

    broker.build = swap_after_reply
    try:
        with pytest.raises(build.BuildIntegrityError, match="does not match the sha256"):
            cpp_extension.load_inline(name="kevin_hash_honest", cpp_sources=HONEST, functions=["double_it"])
    finally:
        del broker.build
    assert log.records[-1].error.startswith("BuildIntegrityError")


ATTACKS = [
    ("symbols_pyrun_asm.cpp", "PyRun_SimpleString", "the Python C API"),
    ("symbols_pthread.cpp", "pthread_create", "native threads"),
    ("symbols_dlopen.cpp", "dlopen", "dynamic loading"),
    ("symbols_syscall.cpp", "syscall", "raw system calls"),
    ("symbols_raw_syscall_asm.cpp", "syscall", "enters the kernel directly"),
]


def _expect_refused(reply, symbol, reason):
    assert not reply.ok and reply.blame == "candidate" and reply.error_type == "RuntimeError", reply
    assert reply.error.startswith(f"Error building extension '{reply.name}': kevin refuses the built library")
    assert symbol in reply.error and reason in reply.error, reply.error


@pytest.mark.slow
@pytest.mark.parametrize(
    "source, symbol, reason", ATTACKS + [("symbols_gilstate_asm.cpp", "PyGILState_Ensure", "Python C API")]
)
def test_forbidden_imports_are_refused_at_build_on_the_fast_path(broker, cache_root, source, symbol, reason):
    if "raw_syscall" in source and platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("inline assembly for x86_64 and arm64 only")
    name = "kevin_attack_fast_" + Path(source).stem
    reply = broker.build(
        _request(name=name, cpp_sources=[(DATA / source).read_text(), IDENTITY], functions=["ident"])
    )
    assert reply.kind == "fast"
    _expect_refused(reply, symbol, reason)
    assert not list(cache_root.glob(f"{name}-*")) and not list((cache_root / ".staging").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("source, symbol, reason", ATTACKS)
def test_forbidden_imports_are_refused_at_build_on_torchs_own_build(
    broker, cache_root, source, symbol, reason
):
    """The same sources through torch's load_inline build (no implicit headers: a quick compile)."""
    if "raw_syscall" in source and platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("inline assembly for x86_64 and arm64 only")
    name = "kevin_attack_pybind_" + Path(source).stem
    reply = broker.build(
        _request(name=name, cpp_sources=(DATA / source).read_text(), no_implicit_headers=True)
    )
    assert reply.kind == "pybind" and reply.fallback == "no_implicit_headers / use_pch"
    _expect_refused(reply, symbol, reason)
    assert not list(cache_root.glob(f"{name}-*"))


@pytest.mark.slow
def test_the_python_c_api_by_asm_name_is_refused_in_a_full_pybind11_build(cache_root):
    """Issue 13, attack 1 exactly as a candidate writes it, built by torch's load_inline: the
    binding's own Python C API imports are allowed, PyRun_SimpleString is not."""
    broker = Broker(cache_root, device_arch="", fast=False)
    source = (DATA / "symbols_pyrun_asm.cpp").read_text()
    reply = broker.build(
        _request(name="kevin_attack_pybind_full", cpp_sources=[source, IDENTITY], functions=["ident"])
    )
    assert reply.kind == "pybind"
    _expect_refused(reply, "PyRun_SimpleString", "beyond what a plain pybind11 binding imports")
    assert "PyGILState" not in reply.error and "PyErr" not in reply.error  # the binding's own imports pass


OUTSIDE_LITE = "torch::Tensor double_it(torch::Tensor x) { return torch::add(x, x); }"


@pytest.mark.slow
def test_an_honest_candidate_outside_the_light_headers_builds_with_torch_and_loads(client):
    log, replies = client
    module = cpp_extension.load_inline(
        name="kevin_broker_pybind", cpp_sources=OUTSIDE_LITE, functions=["double_it"]
    )
    reply = replies[-1]
    assert reply.ok and reply.kind == "pybind" and reply.fallback.startswith("light headers:")
    assert not log.records[-1].fast and log.records[-1].module is module
    assert torch.equal(module.double_it(torch.arange(3.0)), torch.arange(3.0) * 2)


@pytest.mark.slow
def test_a_compile_error_reads_as_load_inlines_and_names_the_entry_not_the_staging_directory(
    client, cache_root
):
    log, _ = client
    with pytest.raises(RuntimeError) as raised:
        cpp_extension.load_inline(
            name="kevin_broker_broken", cpp_sources="int f( {", no_implicit_headers=True
        )
    text = str(raised.value)
    assert text.startswith("Error building extension 'kevin_broker_broken'") and "main.cpp" in text
    assert ".staging" not in text and str(cache_root / "kevin_broker_broken-") in text
    assert log.records[-1].error.startswith("RuntimeError: Error building extension")


# -- gpu: the CUDA half ---------------------------------------------------------------------------------

CUDA_KERNEL = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void twice_kernel(const float* in, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

torch::Tensor twice(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "twice: expected a CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    twice_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
CUDA_DECLARATION = "torch::Tensor twice(torch::Tensor x);"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "pybind"])
def test_an_honest_cuda_candidate_passes_the_checks_and_runs(cache_root, fast):
    broker = Broker(cache_root, fast=fast)  # the GPU's arch, detected
    reply = broker.build(
        _request(
            name=f"kevin_broker_cuda_{'fast' if fast else 'pybind'}",
            cpp_sources=CUDA_DECLARATION,
            cuda_sources=CUDA_KERNEL,
            functions=["twice"],
            extra_cuda_cflags=["-O3", "--use_fast_math", "-lineinfo"],
        )
    )
    assert reply.ok, reply.error
    assert reply.kind == ("fast" if fast else "pybind") and not _mapped(reply.path)
    module = build.load_reply(reply)
    x = torch.randn(1000, device="cuda")
    assert torch.equal(module.twice(x), x * 2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("source, symbol, reason", ATTACKS[:4])
def test_forbidden_imports_in_cuda_host_code_are_refused(cache_root, source, symbol, reason):
    broker = Broker(cache_root)
    attack = (DATA / source).read_text()
    reply = broker.build(
        _request(
            name="kevin_attack_cuda_" + Path(source).stem,
            cpp_sources=CUDA_DECLARATION,
            cuda_sources=[attack, CUDA_KERNEL],
            functions=["twice"],
        )
    )
    assert reply.kind == "fast"
    _expect_refused(reply, symbol, reason)


@pytest.mark.slow
def test_a_build_that_is_not_a_python_module_is_loaded_as_a_torch_library(broker, client):
    log, replies = client
    path = cpp_extension.load_inline(
        name="kevin_broker_library",
        cpp_sources='extern "C" int kevin_library_answer() { return 42; }',
        no_implicit_headers=True,
        is_python_module=False,
    )
    reply = replies[-1]
    assert reply.ok and reply.kind == "library" and path == reply.path and _mapped(path)
    assert log.records[-1].module is None and log.records[-1].error == ""


@pytest.mark.slow
def test_a_denied_import_added_by_a_static_part_of_the_toolchain_is_told_from_the_candidates(tmp_path):
    """Some toolchains (the GPU machine's) link pieces of libstdc++ statically into every library,
    and those import `syscall` (futex waits): the objects say whether the candidate named it."""
    (tmp_path / "toolchain.c").write_text(
        "#include <unistd.h>\n#include <sys/syscall.h>\nlong toolchain_wait(void) { return syscall(SYS_getpid); }\n"
    )
    (tmp_path / "main.c").write_text(
        "long toolchain_wait(void);\nlong kernel(void) { return toolchain_wait(); }\n"
    )
    for stem in ("toolchain", "main"):
        subprocess.run(["cc", "-c", "-fPIC", f"{stem}.c", "-o", f"{stem}.o"], cwd=tmp_path, check=True)
    subprocess.run(["ar", "rcs", "libtoolchain.a", "toolchain.o"], cwd=tmp_path, check=True)
    subprocess.run(
        ["cc", "-shared", "main.o", "libtoolchain.a", "-o", "libkernel.so"], cwd=tmp_path, check=True
    )
    library, policy = tmp_path / "libkernel.so", symbols.Policy(kind="fast")
    assert symbols.check(library, policy, [tmp_path / "main.o"]) == []
    assert any(
        "syscall" in p
        for p in symbols.check(library, policy, [tmp_path / "main.o", tmp_path / "toolchain.o"])
    )
    assert any("syscall" in p for p in symbols.check(library, policy))  # no objects: judged strictly
