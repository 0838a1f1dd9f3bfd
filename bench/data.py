"""Inputs the benchmark generates: a samples.jsonl of N synthetic samples (seeded), shaped like the runner's.

Texts are 300-1,500 words of varied prose from a 2,000-word vocabulary; one in ten ends in a loop (a sentence
repeated to the end), as a speculative arm with the field's fault writes. Each record carries ``output_ids``
(one id per word), as /generate returns them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path


def write_samples(path: Path, n: int = 1000, seed: int = 7) -> Path:
    rng = random.Random(seed)
    vocab = [f"w{i:04d}" for i in range(2000)]
    with path.open("w") as f:
        for i in range(n):
            words = [rng.choice(vocab) for _ in range(rng.randint(300, 1500))]
            if i % 10 == 0:
                unit = ["The", "user's", "question", "is", "2+2.", "So", "the", "answer", "is", "4."]
                cut = len(words) // 5
                words = words[:cut] + unit * ((len(words) - cut) // len(unit))
            text = " ".join(words)
            f.write(json.dumps({
                "profile": "mtp" if i % 2 else "baseline", "speculative": bool(i % 2), "temperature": 0.7,
                "prompt_id": f"p{i % 5}", "sample_index": i // 10, "seed": i, "api": "generate", "text": text,
                "finish_reason": "length", "completion_tokens": len(words),
                "output_ids": [hash(w) % 151_000 for w in words], "error": None,
                "think_opened_by_prompt": False}) + "\n")
    return path
