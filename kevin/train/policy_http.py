"""A `Policy` that samples from an OpenAI-compatible completions server (vLLM, SGLang), stdlib only.

Each prompt is one POST to `{base_url}/completions` (the server batches concurrent requests; up to
`concurrency` are in flight), asking for the sampled tokens' log-probs. `generate_stream` yields each
prompt's completion as its request returns, so its candidate can be evaluated while other requests
are still running; `generate` waits for them all. The body:

    {"model", "prompt", "max_tokens", "temperature", "top_p", "n": 1, "logprobs": 0,
     "return_tokens_as_token_ids": true, "return_token_ids": true, "skip_special_tokens": false, "stop"}

With a `TextCodec` the prompt is sent as token ids (the OpenAI API accepts a list of ints), so the
learner trains on exactly the tokens the server saw; without one, as text. The completion's token
ids are read from `choices[0].token_ids` (vLLM's `return_token_ids`), else from `logprobs.tokens`
written as `token_id:N` (vLLM's `return_tokens_as_token_ids`), else the text is re-tokenised by the
codec and the server's log-probs are dropped (they may not align). The two vLLM fields are
extensions; a server that rejects unknown fields needs `extra_body=None` and `vllm_fields=False`.

The log-probs must be those of the sampling distribution (vLLM: `--logprobs-mode processed_logprobs`
for temperature-scaled ones); the loop's agreement metric shows a mismatch if they are not.

Weights: after each learner step the loop saves the new weights (a LoRA adapter, or the full model)
to a directory and `push_weights` POSTs `{"lora_name", "lora_path", "path", "step"}` to `reload_url`
(vLLM's `/v1/load_lora_adapter` reads the first two). A failed request is retried `retries` times
with a growing pause, then raises: a sampler that does not answer is our infrastructure, not the model.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from kevin.rl.env import Sampling, in_prompt_order
from kevin.train.model import TextCodec
from kevin.train.sampled import SampledGeneration

TOKEN_ID_PREFIX = "token_id:"


class HTTPPolicy:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        codec: TextCodec | None = None,
        api_key_env: str = "",
        timeout_s: float = 3600.0,
        concurrency: int = 64,
        reload_url: str = "",
        stop: Sequence[str] = (),
        vllm_fields: bool = True,
        retries: int = 2,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.codec = codec
        self.api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.reload_url = reload_url
        self.stop = list(stop)
        self.vllm_fields = vllm_fields
        self.retries = retries
        self.extra_body = dict(extra_body or {})

    def generate(self, prompts: list[str], sampling: Sampling) -> list[SampledGeneration]:
        return in_prompt_order(self.generate_stream(prompts, sampling), len(prompts))

    def generate_stream(
        self, prompts: list[str], sampling: Sampling
    ) -> Iterator[tuple[int, SampledGeneration]]:
        """(prompt index, completion) in the order the requests return. A failed request raises once
        the requests in flight have returned; requests not yet sent are dropped."""
        if not prompts:
            return
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts)))
        try:
            requests = {pool.submit(self._complete, prompt, sampling): i for i, prompt in enumerate(prompts)}
            for request in as_completed(requests):
                yield requests[request], request.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def push_weights(self, path: str, step: int) -> dict[str, Any] | None:
        """Tell the server to load the weights saved at `path`; None when no reload URL is set."""
        if not self.reload_url:
            return None
        body = {"lora_name": self.model, "lora_path": str(path), "path": str(path), "step": step}
        return self._post(self.reload_url, body)

    def _complete(self, prompt: str, sampling: Sampling) -> SampledGeneration:
        prompt_ids = self.codec.encode_prompt(prompt) if self.codec is not None else None
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt_ids if prompt_ids is not None else prompt,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "n": 1,
            "logprobs": 0,
        }
        if self.vllm_fields:
            body.update(return_tokens_as_token_ids=True, return_token_ids=True, skip_special_tokens=False)
        if self.stop:
            body["stop"] = self.stop
        body.update(self.extra_body)
        response = self._post(self.url, body)
        try:
            choice = response["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise RuntimeError(f"{self.url} answered without choices: {str(response)[:200]}") from None
        return self._generation(choice, prompt_ids)

    def _generation(self, choice: dict[str, Any], prompt_ids: list[int] | None) -> SampledGeneration:
        text = choice.get("text") or ""
        reason = choice.get("finish_reason")
        token_ids, logprobs = _tokens_and_logprobs(choice)
        if token_ids is None and self.codec is not None:
            token_ids, logprobs = self.codec.encode_completion(text, reason), None
        return SampledGeneration(
            text=text,
            finish_reason=reason,
            completion_tokens=len(token_ids) if token_ids is not None else None,
            prompt_token_ids=tuple(prompt_ids or ()),
            token_ids=tuple(token_ids or ()),
            logprobs=tuple(logprobs) if logprobs is not None and token_ids is not None else None,
        )

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                    return json.loads(reply.read().decode("utf-8") or "{}")
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300]
                if exc.code < 500 or attempt == self.retries:
                    raise RuntimeError(f"{url} answered HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if attempt == self.retries:
                    raise RuntimeError(f"{url} did not answer: {exc}") from None
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")


def _tokens_and_logprobs(choice: dict[str, Any]) -> tuple[list[int] | None, list[float] | None]:
    """The completion's token ids and log-probs from one choice, where the server gave them."""
    block = choice.get("logprobs") or {}
    logprobs = block.get("token_logprobs")
    if logprobs is not None:
        logprobs = [float(v) if v is not None else 0.0 for v in logprobs]
    token_ids = choice.get("token_ids")
    if token_ids is None:
        tokens = block.get("tokens") or []
        if tokens and all(isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) for t in tokens):
            token_ids = [int(t[len(TOKEN_ID_PREFIX) :]) for t in tokens]
    if token_ids is not None:
        token_ids = [int(t) for t in token_ids]
        if logprobs is not None and len(logprobs) != len(token_ids):
            logprobs = None
    return token_ids, logprobs
