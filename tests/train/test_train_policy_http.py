"""The OpenAI-compatible HTTP sampler against a real local server started by the test
(kevin.train.policy_http), and a training run that samples from it and pushes weights to it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from train_helpers import FakeEvaluator, completion, tasks, tiny_config

from kevin.rl.env import Sampling
from kevin.train.policy_http import HTTPPolicy


class CompletionsServer:
    """A stdlib server speaking the completions format on 127.0.0.1: each answer's tokens are
    derived from the prompt; `mode` picks how token ids are reported; `failures` 500s come first;
    a prompt in `delays_s` is answered that many seconds late."""

    def __init__(self, mode: str = "token_ids", failures: int = 0, delays_s: dict | None = None) -> None:
        self.mode = mode
        self.failures = failures
        self.delays_s = delays_s or {}
        self.requests: list[dict] = []
        self.reloads: list[dict] = []
        self.answered = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/reload":
                    server.reloads.append(body)
                    return self._send(200, {"status": "ok"})
                if self.path != "/v1/completions":
                    return self._send(404, {"error": "no such endpoint"})
                if server.failures > 0:
                    server.failures -= 1
                    return self._send(500, {"error": "busy"})
                if body.get("model") != "policy":
                    return self._send(400, {"error": f"unknown model {body.get('model')}"})
                server.requests.append(body)
                time.sleep(server.delays_s.get(str(body["prompt"]), 0.0))
                return self._send(200, server.answer(body))

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def answer(self, body: dict) -> dict:
        prompt = body["prompt"]
        seed = len(prompt) if isinstance(prompt, list) else len(prompt.split())
        count = min(body["max_tokens"], 4)
        ids = [10 + (seed + k) % 50 for k in range(count)]
        logprobs = [-0.1 * (k + 1) for k in range(count)]
        with self.lock:
            self.answered += 1
            tag = self.answered % 4  # varied answers, so the rewards of a group vary
        choice = {
            "index": 0,
            "text": completion(tag),
            "finish_reason": "length" if count == body["max_tokens"] else "stop",
            "logprobs": {"tokens": [f"t{i}" for i in ids], "token_logprobs": logprobs},
        }
        if self.mode == "token_ids":
            choice["token_ids"] = ids
        elif self.mode == "token_strings":
            choice["logprobs"]["tokens"] = [f"token_id:{i}" for i in ids]
        return {"id": "cmpl-1", "object": "text_completion", "model": body["model"], "choices": [choice]}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class WordCodec:
    """One token per word: enough to check that prompts travel as token ids."""

    eos_id = 2

    def encode_prompt(self, text: str) -> list[int]:
        return [3 + len(word) for word in text.split()]

    def encode_completion(self, text: str, finish_reason):
        return [3 + len(word) for word in text.split()] + ([2] if finish_reason == "stop" else [])


def test_completions_with_token_ids_and_log_probs_in_prompt_order():
    with CompletionsServer() as server:
        policy = HTTPPolicy(server.url + "/v1", "policy", codec=WordCodec(), concurrency=3)
        prompts = ["a b", "a b c d e", "a b c"]
        outputs = policy.generate(prompts, Sampling(temperature=0.7, top_p=0.95, max_tokens=8))
    assert [o.prompt_token_ids for o in outputs] == [tuple(WordCodec().encode_prompt(p)) for p in prompts]
    assert [o.token_ids[0] for o in outputs] == [12, 15, 13]  # 10 + number of prompt tokens
    assert all(o.logprobs == pytest.approx((-0.1, -0.2, -0.3, -0.4)) for o in outputs)
    assert all(o.finish_reason == "stop" and o.completion_tokens == 4 for o in outputs)
    assert sorted(o.text for o in outputs) == sorted(completion(tag) for tag in (1, 2, 3))
    sent = server.requests[0]
    assert sent["temperature"] == 0.7 and sent["top_p"] == 0.95 and sent["max_tokens"] == 8
    assert sent["logprobs"] == 0 and sent["n"] == 1 and isinstance(sent["prompt"], list)


def test_streaming_yields_each_completion_as_its_request_returns():
    prompts = ["slow", "a b", "a b c"]
    with CompletionsServer(delays_s={"slow": 1.0}) as server:
        policy = HTTPPolicy(server.url + "/v1", "policy", concurrency=3)
        started = time.monotonic()
        arrived = []
        for index, output in policy.generate_stream(prompts, Sampling(max_tokens=8)):
            arrived.append((index, output, time.monotonic() - started))
        listed = policy.generate(prompts, Sampling(max_tokens=8))
    assert sorted(index for index, _, _ in arrived) == [0, 1, 2] and arrived[-1][0] == 0
    assert arrived[0][2] < 0.8  # the quick answers came before the slow request returned
    assert arrived[-1][2] >= 1.0
    # each completion belongs to its prompt (the fake server's tokens start at 10 + its word count)
    assert {index: output.token_ids[0] for index, output, _ in arrived} == {0: 11, 1: 12, 2: 13}
    assert [output.token_ids[0] for output in listed] == [11, 12, 13]  # generate: prompt order


def test_token_ids_written_as_strings_and_text_prompts():
    with CompletionsServer(mode="token_strings") as server:
        policy = HTTPPolicy(server.url + "/v1", "policy")
        (output,) = policy.generate(["one two three"], Sampling(max_tokens=4))
    assert output.token_ids == (13, 14, 15, 16) and output.finish_reason == "length" and output.truncated
    assert server.requests[0]["prompt"] == "one two three"
    with CompletionsServer(mode="none") as server:
        (output,) = HTTPPolicy(server.url + "/v1", "policy", codec=WordCodec()).generate(
            ["x"], Sampling(max_tokens=9)
        )
    # no ids from the server: the text is re-tokenised and the server's log-probs dropped
    assert (
        output.token_ids == tuple(WordCodec().encode_completion(output.text, "stop"))
        and output.logprobs is None
    )


def test_retries_server_errors_and_reports_client_errors():
    with CompletionsServer(failures=2) as server:
        (output,) = HTTPPolicy(server.url + "/v1", "policy", retries=2).generate(
            ["a"], Sampling(max_tokens=4)
        )
        assert output.token_ids
        with pytest.raises(RuntimeError, match="HTTP 400.*unknown model"):
            HTTPPolicy(server.url + "/v1", "other").generate(["a"], Sampling(max_tokens=4))
    with pytest.raises(RuntimeError, match="did not answer"):
        HTTPPolicy(server.url + "/v1", "policy", retries=0, timeout_s=2).generate(
            ["a"], Sampling(max_tokens=4)
        )


def test_weights_are_pushed_to_the_reload_endpoint():
    with CompletionsServer() as server:
        assert HTTPPolicy(server.url + "/v1", "policy").push_weights("/w/step_1", 1) is None
        policy = HTTPPolicy(server.url + "/v1", "policy", reload_url=server.url + "/reload")
        assert policy.push_weights("/w/step_1", 1) == {"status": "ok"}
    assert server.reloads == [
        {"lora_name": "policy", "lora_path": "/w/step_1", "path": "/w/step_1", "step": 1}
    ]


def test_a_training_run_samples_from_the_server_and_pushes_each_step(tmp_path):
    from kevin.train.loop import train

    with CompletionsServer() as server:
        config = tiny_config(
            rollout={
                "policy": "http",
                "http_url": server.url + "/v1",
                "http_reload_url": server.url + "/reload",
            },
            loop={"steps": 2},
        )
        result = train(
            config,
            tmp_path / "run",
            tasks=tasks(),
            evaluator_factory=lambda run: FakeEvaluator(),
            out=lambda line: None,
        )
    assert result.last_step == 2
    assert len(server.requests) == 2 * 2 * 2 * 2  # steps x tasks x trajectories x turns
    assert [r["step"] for r in server.reloads] == [1, 2]
    pushed = tmp_path / "run" / "weights" / "step_000002"
    assert (pushed / "config.json").is_file() and (pushed / "tokenizer_config.json").is_file()
    assert server.reloads[-1]["path"] == str(pushed)
    # the sampler's log-probs were checked against the learner's (they disagree: the server is fake)
    assert result.history[-1]["learn/logprob_diff_max"] > 0
    assert result.history[-1]["learn/gradient_steps"] >= 1
