"""bench/kernelbench_peer.py on the CPU against a fake KernelBench written into tmp_path: its
`eval_kernel_against_ref` answers what the candidate's `MODE=` line asks (correct, wrong, a compile
error, raise, None, a crash, a hang, slow), so the per-step processes, the timeout, the deadline, the
verdicts, the report and `compare` are tested without a GPU, torch or KernelBench."""

from __future__ import annotations

import importlib.util
import json
import time

import pytest
from bench_scripts import load_script

peer = load_script("kernelbench_peer_bench", "kernelbench_peer.py")

FAKE_EVAL = """
import os, time
from dotenv import load_dotenv  # not installed on this machine: kernelbench_peer.py stubs it
load_dotenv()


class Result:
    def __init__(self, **fields):
        self.__dict__.update(compiled=False, correctness=False, metadata={}, runtime=-1.0, ref_runtime=-1.0)
        self.__dict__.update(fields)

    def model_dump(self):
        return dict(self.__dict__)


def build_compile_cache(custom_model_src, verbose=False, build_dir=None):
    os.makedirs(build_dir, exist_ok=True)
    if "MODE=compile_error" in custom_model_src:
        return False, "", "fake nvcc: error"
    open(os.path.join(build_dir, "built"), "w").close()
    return True, "", None


def eval_kernel_against_ref(original_model_src, custom_model_src, **kwargs):
    mode = custom_model_src.split("MODE=")[1].split()[0]
    seen = {key: kwargs[key] for key in ("num_correct_trials", "num_perf_trials", "seed_num", "build_dir")}
    seen.update(prebuilt=os.path.exists(os.path.join(kwargs["build_dir"], "built")), problem=original_model_src.strip())
    if mode == "raise":
        raise ValueError("fake failure inside eval")
    if mode == "hang":
        time.sleep(600)
    if mode == "slow":
        time.sleep(2)
        mode = "correct"
    if mode == "none":
        return None
    if mode == "crash":
        os._exit(3)
    if mode == "compile_error":
        return Result(metadata={"compilation_error": "fake"})
    correct = mode == "correct"
    return Result(compiled=True, correctness=correct, runtime=1.5 if correct else -1.0, ref_runtime=3.0, metadata=seen)
"""

KINDS = {"correct": "correct", "slow": "correct", "wrong": "wrong", "compile_error": "compile_error"}


@pytest.fixture
def fake(tmp_path):
    """A fake KernelBench tree (src/kernelbench), a problems dir, and a `rows(...)` maker."""
    package = tmp_path / "KernelBench" / "src" / "kernelbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "eval.py").write_text(FAKE_EVAL)
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level1" / "1_fake.py").write_text("PROBLEM ONE\n")
    candidates = tmp_path / "candidates"
    candidates.mkdir()

    def rows(*specs: tuple[str, str, str]) -> list[dict]:
        made = []
        for name, mode, kind in specs:
            (candidates / f"{name}.py").write_text(f"# MODE={mode}\n")
            made.append(
                {
                    "id": name,
                    "problem": "level1/1_fake.py",
                    "problem_id": "L1_1",
                    "candidate": f"{name}.py",
                    "kind": kind,
                    "expected": KINDS[kind],
                    "note": "",
                    "path": str(candidates / f"{name}.py"),
                }
            )
        return made

    return {"src": tmp_path / "KernelBench", "kb": kb, "rows": rows, "tmp": tmp_path}


def _plan(fake, *extra: str, deadline_s: float = 600, hard_stop_s: float = 650, work: str = "work"):
    args = peer.parse_args(["--gpu-arch", *extra])  # no arch: the fake has no kernelbench.utils
    now = time.monotonic()
    return peer.Plan(fake["kb"], fake["src"], fake["tmp"] / work, args, now + deadline_s, now + hard_stop_s)


def test_each_candidate_in_its_own_process_with_a_timeout(fake):
    rows = fake["rows"](
        ("ok", "correct", "correct"),
        ("raises", "raise", "correct"),
        ("hangs", "hang", "correct"),
        ("after_hang", "wrong", "wrong"),
        ("none", "none", "correct"),
        ("crash", "crash", "correct"),
        ("bad_build", "compile_error", "compile_error"),
    )
    trials = ["--num-correct-trials", "7", "--num-perf-trials", "11"]
    plan = _plan(fake, "--timeout-s", "3", "--build-jobs", "2", *trials)
    started = time.monotonic()
    report = peer.run_peer(rows, plan, fake["tmp"] / "out")
    assert time.monotonic() - started < 40  # the hang was killed at its timeout, not waited out
    by_id = {r["id"]: r for r in report["rows"]}
    assert {i: r["verdict"] for i, r in by_id.items()} == {
        "ok": "correct",
        "raises": "error",
        "hangs": "timeout",
        "after_hang": "wrong",  # a crash or a hang before it does not end the run
        "none": "error",
        "crash": "error",
        "bad_build": "compile_error",
    }
    assert 3 <= by_id["hangs"]["eval_s"] < 15 and by_id["hangs"]["error"] == "timed out"
    assert "ValueError: fake failure inside eval" in by_id["raises"]["error"]
    assert by_id["crash"]["error"].startswith("exit 3")
    assert "returned None" in by_id["none"]["error"]
    assert by_id["bad_build"]["built"] is False and by_id["bad_build"]["build_error"] == "fake nvcc: error"
    ok = by_id["ok"]
    assert (ok["compiled"], ok["correctness"], ok["runtime_ms"], ok["ref_runtime_ms"]) == (
        True,
        True,
        1.5,
        3.0,
    )
    assert by_id["after_hang"]["runtime_ms"] is None  # KernelBench's -1.0: not measured
    seen = ok["metadata"]
    assert (seen["num_correct_trials"], seen["num_perf_trials"], seen["seed_num"]) == (7, 11, 42)
    assert seen["prebuilt"] is True  # phase 2 used the build dir phase 1 filled
    assert seen["problem"] == "PROBLEM ONE"
    assert ok["build_s"] > 0 and ok["eval_s"] > 0
    if importlib.util.find_spec("dotenv") is None:
        assert "dotenv" in report["stubbed"]


def test_verdict_mapping():
    verdict = peer.peer_verdict
    assert verdict(None) == "not_run"
    assert verdict({"timed_out": True}) == "timeout"
    assert verdict({"timed_out": True, "cut": True}) == "not_run"
    assert verdict({"timed_out": False, "died": "exit -11"}) == "error"
    assert verdict({"raised": "TypeError: x"}) == "error"
    assert verdict({"result": None}) == "error"
    assert verdict({"result": {"compiled": False}}) == "compile_error"
    assert verdict({"result": {"compiled": True, "correctness": False}}) == "wrong"
    assert verdict({"result": {"compiled": True, "correctness": True}}) == "correct"
    # an answer written before a hang at exit is still KernelBench's verdict
    assert verdict({"timed_out": True, "result": {"compiled": True, "correctness": True}}) == "correct"


def test_no_candidate_starts_after_the_deadline(fake):
    rows = fake["rows"](("first", "slow", "correct"), ("second", "correct", "correct"))
    builds = {r["id"]: {"built": True} for r in rows}
    plan = _plan(fake, deadline_s=1.0)
    done = peer.evaluate(rows, builds, plan)
    assert [r["verdict"] for r in done] == ["correct", "not_run"]
    assert not (plan.work / "second").exists()
    assert peer.prebuild(rows, _plan(fake, deadline_s=-1)) == {"first": None, "second": None}
    assert not (plan.work / "first" / "build.log").exists()


def test_a_step_past_deadline_plus_grace_is_cut_not_blamed(fake):
    rows = fake["rows"](("hangs", "hang", "correct"))
    done = peer.evaluate(rows, {"hangs": {}}, _plan(fake, deadline_s=5, hard_stop_s=2))
    assert done[0]["verdict"] == "not_run" and done[0]["error"] == "cut at the deadline"
    assert done[0]["eval_s"] < 10


def test_skip_failed_builds_books_compile_error_without_phase_2(fake):
    rows = fake["rows"](("bad_build", "compile_error", "compile_error"))
    plan = _plan(fake, "--skip-failed-builds")
    report = peer.run_peer(rows, plan, fake["tmp"] / "out")
    assert report["rows"][0]["verdict"] == "compile_error"
    assert (plan.work / "bad_build" / "build.log").exists()
    assert not (plan.work / "bad_build" / "eval.log").exists()


def test_main_writes_json_and_markdown_and_prints_the_summary_last(fake, capsys):
    rows = fake["rows"](("a_ok", "correct", "correct"), ("a_wrong", "wrong", "wrong"))
    rows += fake["rows"](("a_bad", "compile_error", "compile_error"), ("b_other", "correct", "correct"))
    manifest = fake["tmp"] / "candidates" / "manifest.json"
    manifest.write_text(json.dumps([{k: v for k, v in r.items() if k != "path"} for r in rows]))
    out = fake["tmp"] / "out"
    common = [
        "--manifest",
        str(manifest),
        "--kernelbench",
        str(fake["kb"]),
        "--kernelbench-src",
        str(fake["src"]),
    ]
    common += ["--out", str(out), "--work-dir", str(fake["tmp"] / "work")]
    code = peer.main([*common, "--gpu-arch", "--only", "a_", "--limit", "2"])
    assert code == 0
    report = json.loads((out / "kernelbench_peer.json").read_text())
    assert report["complete"] is True
    assert len(report["rows"]) == 2 and all(r["id"].startswith("a_") for r in report["rows"])
    config, summary = report["config"], report["summary"]
    assert (config["num_correct_trials"], config["num_perf_trials"], config["timeout_s"]) == (5, 100, 120.0)
    assert summary["finished"] == 2 and summary["of"] == 2
    wall_s = summary["wall_s"]  # rounded to 0.01 s
    assert 2 / (wall_s + 0.005) * 3600 <= summary["candidates_per_hour"] <= 2 / (wall_s - 0.005) * 3600
    assert summary["wall_s"] >= summary["build_phase_s"] > 0
    table = (out / "kernelbench_peer.md").read_text()
    for row in report["rows"]:
        assert f"| {row['id']} | {row['expected']} | {row['verdict']} |" in table
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("KernelBench's evaluator: 2/2 candidates") and "candidates/hour" in last


def test_dry_run_checks_import_and_problems_and_runs_nothing(fake, capsys):
    rows = fake["rows"](("ok", "correct", "correct"))
    plan = _plan(fake)
    assert peer.dry_run(rows, plan) == 0
    assert "imports" in capsys.readouterr().out
    assert not any(p.name.startswith(("build", "eval")) for p in plan.work.rglob("*"))
    nowhere = peer.Plan(plan.kb, fake["tmp"] / "nowhere", plan.work, plan.args, plan.deadline, plan.hard_stop)
    assert peer.dry_run(rows, nowhere) == 1
    assert "does not import" in capsys.readouterr().out
    (fake["kb"] / "level1" / "1_fake.py").unlink()
    assert peer.dry_run(rows, plan) == 1


def test_pydantic_stub_gives_each_result_its_own_defaults():
    base = peer.STUBS["pydantic"]().BaseModel

    class Result(base):
        compiled: bool = False
        metadata: dict = {}
        runtime: float = -1.0

    first, second = Result(compiled=True), Result()
    second.metadata["x"] = 1
    assert first.model_dump() == {"compiled": True, "metadata": {}, "runtime": -1.0}
    assert Result().metadata == {}
    with pytest.raises(RuntimeError, match="not installed"):
        peer.STUBS["openai"]().OpenAI()


def test_compare_joins_on_id_and_sets_the_rates_side_by_side(tmp_path, capsys):
    kevin = {
        "pass": "cold",
        "kevin": {
            "summary": {"candidates_per_hour": 1000.0, "wall_s": 234.0},
            "rows": [
                {"id": "a", "verdict": "correct"},
                {"id": "b", "verdict": "wrong"},
                {"id": "c", "verdict": "compile_error"},
                {"id": "d", "verdict": "not_run"},
                {"id": "k_only", "verdict": "correct"},
            ],
        },
    }
    peer_rows = [
        {"id": "a", "verdict": "correct", "expected": "correct"},
        {"id": "b", "verdict": "correct", "expected": "wrong"},
        {"id": "c", "verdict": "compile_error", "expected": "compile_error"},
        {"id": "d", "verdict": "correct", "expected": "correct"},
        {"id": "e", "verdict": "not_run", "expected": "correct"},
    ]
    peer_report = {"rows": peer_rows, "summary": {"candidates_per_hour": 400.0, "wall_s": 500.0}}
    result = peer.compare(kevin, peer_report)
    assert (result["joined"], result["agree"], result["agreement"]) == (3, 2, 0.667)
    assert [r["id"] for r in result["disagreements"]] == ["b"]
    assert result["as_expected"] == {"kevin": 3, "kernelbench": 2}
    assert result["only_kevin"] == ["k_only"] and result["only_kernelbench"] == ["d"]
    assert result["rates"]["kevin_over_kernelbench"] == 2.5
    (tmp_path / "kernelbench_peer.json").write_text(json.dumps(peer_report))
    (tmp_path / "throughput_cold.json").write_text(json.dumps(kevin))
    assert peer.main(["--out", str(tmp_path), "--compare", str(tmp_path / "throughput_cold.json")]) == 0
    assert "2.5x" in capsys.readouterr().out
    assert "| b | wrong | wrong | correct | False |" in (tmp_path / "kernelbench_peer_compare.md").read_text()
