"""kevin.evaluator.buildjail: a build's compilers read their directory and the toolchain, not the
judge's files. Until session 29 a candidate could `#include` (or `.incbin`) any file the judge could
read and have it echoed in the compile error that becomes the policy's feedback, or built into its
library (bench/results/isolation.md listed it as not protected)."""

from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp_extension

from kevin.evaluator import buildjail, cores
from kevin.evaluator.broker import Broker
from kevin.evaluator.confine import LockDown, readable_roots
from kevin.evaluator.fastbuild import BUILD_NICENESS, run_killable

SECRET = "kevin_secret_4711"
IDENTITY = "torch::Tensor ident(torch::Tensor x) { return x; }"


def _landlock_abi() -> int:
    """The Landlock ABI a lock-down gets here, asked in a child (a lock-down is irreversible)."""
    code = (
        "import marshal, sys, tempfile; from kevin.evaluator import confine; "
        "policy = marshal.dumps({'job_dir': tempfile.mkdtemp(), 'seccomp': False}); "
        "print(marshal.loads(confine.lock_down_marshal(policy)).get('landlock_abi', 0))"
    )
    root = str(Path(buildjail.__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False)
    return int(done.stdout.strip() or 0) if done.returncode == 0 else 0


needs_landlock = pytest.mark.skipif(not _landlock_abi(), reason="a kernel without Landlock: builds run unjailed")


@pytest.fixture
def secret(tmp_path):
    """A file the judge can read, outside every directory a build may read."""
    path = tmp_path / "private" / "secret.h"
    path.parent.mkdir()
    path.write_text(f"{SECRET} leaked;\n")
    return path


@needs_landlock
def test_a_jailed_command_reads_and_writes_only_where_it_may(tmp_path, secret):
    build = tmp_path / "build"
    build.mkdir()
    returncode, output = run_killable(["cat", str(secret)], build, 30, readable=[])
    assert returncode != 0 and SECRET not in output and "Permission denied" in output, output
    returncode, output = run_killable(["cat", str(secret)], build, 30, readable=[secret.parent])
    assert returncode == 0 and SECRET in output  # what the caller names is readable
    script = 'echo "$TMPDIR"; touch own && echo wrote; touch ../outside 2>/dev/null || echo refused; cat; echo end'
    returncode, output = run_killable(["sh", "-c", script], build, 30, readable=[])
    assert returncode == 0 and output.split() == [str(build.resolve()), "wrote", "refused", "end"], output
    assert (build / "own").exists() and not (tmp_path / "outside").exists()


@needs_landlock
def test_a_jailed_command_reads_only_the_loaders_and_name_services_files_of_etc(tmp_path):
    """A root judge owns /etc/shadow and the host's ssh keys, and reads them without capabilities:
    a build got all of /etc (as runners do) until it was narrowed to what compilers open there."""
    assert "/etc" not in readable_roots(LockDown(job_dir=str(tmp_path), etc=buildjail.ETC))
    assert "/etc" in readable_roots(LockDown(job_dir=str(tmp_path)))  # runners: unchanged
    script = "for f in /etc/ld.so.cache /etc/passwd /etc/hostname /etc/shadow; do head -c 1 $f >/dev/null 2>&1 && echo $f; done; true"
    returncode, output = run_killable(["sh", "-c", script], tmp_path, 30, readable=[])
    present = [path for path in ("/etc/ld.so.cache", "/etc/passwd") if Path(path).exists()]
    assert returncode == 0 and output.split() == present, output  # not /etc/hostname, not /etc/shadow
    returncode, output = run_killable(["sh", "-c", script], tmp_path, 30)
    assert "/etc/hostname" in output or not Path("/etc/hostname").exists()  # unjailed: everything


def test_the_jail_can_be_switched_off(tmp_path, secret, monkeypatch):
    monkeypatch.setenv(buildjail.VARIABLE, "0")
    returncode, output = run_killable(["cat", str(secret)], tmp_path, 30, readable=[])
    assert returncode == 0 and SECRET in output


def test_a_command_the_jail_cannot_run_says_so(tmp_path):
    returncode, output = run_killable(["kevin-no-such-compiler"], tmp_path, 30, readable=[])
    assert returncode != 0 and "kevin-no-such-compiler" in output


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="a kernel without scheduler autogroups")
def test_a_jailed_build_still_waits_for_its_sessions_weight(tmp_path, monkeypatch):
    real = cores.nicer_session

    def late(pid: int, niceness: int) -> str:
        time.sleep(0.3)
        return real(pid, niceness)

    monkeypatch.setattr(cores, "nicer_session", late)
    returncode, output = run_killable(["cat", "/proc/self/autogroup"], tmp_path, 30, readable=[])
    assert returncode == 0 and output.split()[-1] == str(BUILD_NICENESS), output


def _request(**kwargs):
    bound = inspect.signature(cpp_extension.load_inline).bind(**kwargs)
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in ("build_directory", "verbose", "keep_intermediates")}


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("jail") / "builds"


def _refused_without_the_secret(reply) -> None:
    assert not reply.ok and reply.blame == "candidate", reply
    assert SECRET not in reply.error, reply.error


@needs_landlock
@pytest.mark.slow
@pytest.mark.parametrize("fast", [True, False], ids=["fast_path", "torch_build"])
def test_an_include_of_the_judges_file_is_not_echoed_in_the_compile_error(cache_root, secret, fast):
    broker = Broker(cache_root, device_arch="", fast=fast)
    source = f'#include "{secret}"\n{IDENTITY}'
    reply = broker.build(_request(name=f"kevin_jail_include_{fast}", cpp_sources=source, functions=["ident"]))
    _refused_without_the_secret(reply)
    assert "Permission denied" in reply.error, reply.error


@needs_landlock
@pytest.mark.slow
def test_an_incbin_of_the_judges_file_is_not_built_into_the_library(cache_root, secret):
    broker = Broker(cache_root, device_arch="")
    source = f'__asm__(".section .rodata\\n.incbin \\"{secret}\\"\\n.text");\n{IDENTITY}'
    reply = broker.build(_request(name="kevin_jail_incbin", cpp_sources=source, functions=["ident"]))
    _refused_without_the_secret(reply)
    assert not list(cache_root.glob("kevin_jail_incbin-*"))


@needs_landlock
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not cpp_extension.CUDA_HOME, reason="no CUDA compiler")
def test_nvcc_is_jailed_too(cache_root, secret):
    broker = Broker(cache_root, device_arch="9.0")
    cuda = f'#include "{secret}"\n__global__ void k(float* x) {{ x[0] = 1.0f; }}\n'
    reply = broker.build(
        _request(name="kevin_jail_nvcc", cpp_sources=IDENTITY, cuda_sources=cuda, functions=["ident"])
    )
    _refused_without_the_secret(reply)
