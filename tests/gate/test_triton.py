"""The gate's Triton rules (kevin.gate.triton) and the general rules as they apply to Triton candidates:
each planted violation is caught with its rule, and the honest bundled Triton candidates pass.
Parsing only: triton need not be installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kevin.gate import RULES, check_source

BUNDLED = Path(__file__).resolve().parents[2] / "kevin" / "tasks" / "bundled" / "triton"

HEAD = """import os
import torch
import torch.nn as nn
import triton
import triton.language as tl

"""

KERNEL = """@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)
"""

FORWARD = """

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
{body}        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out.view(x.shape)
"""


def candidate(kernel: str = KERNEL, body: str = "", decorators: str = "", prelude: str = "") -> str:
    return HEAD + prelude + decorators + kernel + FORWARD.format(body=body)


def rules(source: str) -> list[str]:
    return check_source(source, "triton").rules


def test_the_plain_candidate_and_every_bundled_triton_candidate_pass():
    assert rules(candidate()) == []
    files = sorted(BUNDLED.glob("*.py"))
    assert len(files) >= 5
    for path in files:
        source = path.read_text()
        compile(source, str(path), "exec")  # what py_compile checks, beyond the gate's ast.parse
        report = check_source(source, "triton")
        assert report.ok, f"{path.name}: {report.summary()}"


def test_rule_ids_are_registered():
    assert {"triton-kernel-body", "triton-value-tuning"} <= set(RULES)


# -- (a) a kernel, launched on every path ----------------------------------------------------------


def test_no_jit_kernel_and_a_kernel_never_launched():
    plain = candidate().replace("@triton.jit\n", "")
    assert "no-custom-kernel" in rules(plain)
    unlaunched = candidate().replace(
        "        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n", ""
    )
    assert "kernel-not-called" in rules(unlaunched)


def test_a_path_that_skips_the_launch_is_a_fallback():
    source = candidate(body="        if n < 4096:\n            return torch.relu(x)\n")
    assert {"fallback", "framework-compute"} <= set(rules(source))
    early = candidate(body="        if n == 0:\n            return out\n")
    assert "fallback" in rules(early)


def test_autotune_and_heuristics_stacked_on_jit_still_count_as_the_kernel():
    decorators = (
        '@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["n"])\n'
        '@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})\n'
    )
    assert rules(candidate(decorators=decorators)) == []


# -- (b) no torch compute in forward beyond allocation and views ------------------------------------


def test_torch_compute_beside_the_kernel_is_rejected_and_allocation_views_are_not():
    assert "framework-compute" in rules(candidate(body="        x = x * 2\n"))
    assert "framework-compute" in rules(candidate(body="        x = torch.tanh(x)\n"))
    allowed = (
        "        scratch = torch.empty((n,), device=x.device, dtype=x.dtype)\n"
        "        flat = x.view(-1)\n        rows = x.shape[0]\n        s = x.stride(0)\n"
        "        grid = triton.cdiv(n, triton.next_power_of_2(1024))\n"
    )
    assert rules(candidate(body=allowed)) == []


# -- (c) tuning that reads the inputs' values ----------------------------------------------------------


@pytest.mark.parametrize(
    "decorator",
    [
        '@triton.heuristics({"BIG": lambda args: args["x_ptr"].max() > 0})\n',
        '@triton.heuristics({"BIG": lambda args: args["x_ptr"][0] > 0})\n',
        '@triton.heuristics({"BIG": lambda args: bool(args["x_ptr"].sum())})\n',
        '@triton.heuristics({"BIG": lambda args: torch.any(args["x_ptr"] > 0)})\n',
        '@triton.heuristics({"BIG": lambda args: list(args.values())[0].max() > 0})\n',
        '@triton.autotune(configs=[triton.Config({})], key=["x_ptr"])\n',
        "@triton.autotune(configs=[triton.Config({})], key=KEYS)\n",
        '@triton.autotune(configs=[triton.Config({})], key=["n"], '
        'prune_configs_by={"early_config_prune": lambda configs, nargs, **kw: configs[: int(nargs["x_ptr"].mean())]})\n',
        '@triton.autotune(configs=[triton.Config({})], key=["n"], '
        'prune_configs_by={"perf_model": lambda x_ptr, **kw: x_ptr.abs().sum(), "top_k": 1})\n',
        '@triton.autotune(configs=[triton.Config({})], key=["n"], pre_hook=lambda nargs: nargs["out_ptr"].copy_(nargs["x_ptr"]))\n',
        '@triton.autotune(configs=[triton.Config({}, pre_hook=lambda nargs: None)], key=["n"])\n',
        "@triton.heuristics(TABLE)\n",
    ],
    ids=[
        "heuristic-max", "heuristic-index", "heuristic-sum", "heuristic-torch", "heuristic-dict-values",
        "key-tensor", "key-computed", "prune-mean", "perf-model", "autotune-pre-hook", "config-pre-hook",
        "heuristics-table",
    ],
)  # fmt: skip
def test_tuning_that_can_read_input_values_is_rejected(decorator):
    prelude = 'KEYS = ["n"]\nTABLE = {"BIG": lambda args: args["x_ptr"].max() > 0}\n\n'
    assert "triton-value-tuning" in rules(candidate(decorators=decorator, prelude=prelude))


def test_tuning_on_shapes_and_integer_arguments_is_allowed():
    prune = (
        "def prune(configs, nargs, **kwargs):\n"
        '    return [c for c in configs if c.kwargs["BLOCK"] <= triton.next_power_of_2(nargs["n"])]\n\n\n'
    )
    decorator = (
        '@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})], key=["n"],\n'
        '                 prune_configs_by={"early_config_prune": prune, "top_k": 2}, reset_to_zero=["out_ptr"])\n'
        '@triton.heuristics({"ALIGNED": lambda args: args["x_ptr"].data_ptr() % 16 == 0 and args["x_ptr"].shape[0] > 1,\n'
        '                    "WIDE": lambda args: args["n"] > 4096 and args["x_ptr"].dtype == torch.float32})\n'
    )
    source = candidate(decorators=decorator, prelude=prune).replace(", BLOCK=1024)", ")")
    assert rules(source) == [], check_source(source, "triton").summary()


# -- (d) what a @triton.jit body may use ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "prelude"),
    [
        ("    y = torch.exp(x)\n", ""),
        ("    y = x * SCALE\n", "SCALE = torch.ones(1)\n"),
        ("    y = helper(x)\n", "def helper(v):\n    return v\n\n\n"),
        ("    y = x * FACTOR\n", "FACTOR = float(os.environ.get('F', '1'))\n"),
        ("    global G\n    y = x\n", ""),
    ],
    ids=["torch-call", "global-tensor", "python-function", "computed-global", "global-statement"],
)
def test_a_kernel_body_that_reaches_outside_triton_is_rejected(line, prelude):
    kernel = KERNEL.replace(
        "    tl.store(out_ptr + offsets, tl.maximum(x, 0.0)", line + "    tl.store(out_ptr + offsets, y"
    )
    assert "triton-kernel-body" in rules(candidate(kernel=kernel, prelude=prelude))


def test_a_kernel_body_may_use_tl_constexpr_globals_jit_helpers_math_and_builtins():
    prelude = (
        "import math\nfrom triton.language.extra import libdevice\n"
        "SLOPE: tl.constexpr = 0.01\nLIMIT = tl.constexpr(6.0)\nSTEPS = 2\n\n\n"
        "@triton.jit\ndef leaky(v, slope):\n    return tl.where(v > 0, v, v * slope)\n\n\n"
    )
    line = (
        "    y = leaky(x, SLOPE) * math.pi / math.pi\n"
        "    for _ in range(STEPS):\n        y = tl.minimum(y, LIMIT)\n"
        "    y = tl.maximum(y, -float('inf')) + 0.0 * libdevice.tanh(y)\n"
    )
    kernel = KERNEL.replace(
        "    tl.store(out_ptr + offsets, tl.maximum(x, 0.0)", line + "    tl.store(out_ptr + offsets, y"
    )
    assert rules(candidate(kernel=kernel, prelude=prelude)) == []


# -- the environment Triton reads -------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        'os.environ["TRITON_INTERPRET"] = "1"\n',
        'os.environ.update({"TRITON_CACHE_DIR": "/tmp/shared"})\n',
        'os.environ.setdefault("TRITON_INTERPRET", "1")\n',
        'os.putenv("TRITON_INTERPRET", "1")\n',
        'os.environ["TRITON" + "_INTERPRET"] = "1"\n',
    ],
    ids=["store", "update", "setdefault", "putenv", "computed"],
)
def test_setting_triton_variables_is_global_state(line):
    assert "global-state" in rules(candidate(prelude=line))


def test_other_environment_variables_are_left_alone():
    assert rules(candidate(prelude='os.environ["OMP_NUM_THREADS"] = "1"\n')) == []
