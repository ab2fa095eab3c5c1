"""Throughput of the local embedding provider: 512 sentences of ~25 words, batch 32, 1 thread.

Run: .venv/bin/python bench/embeddings.py   (no database, no Django settings needed)
"""

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("KOINON_EMBEDDING_THREADS", "1")  # before the model loads

from knowledge.embeddings import LocalMiniLMProvider

VOCABULARY = (
    "the a evidence server answers question permitted policy document space member curator "
    "receipt verified source revenue quarter growth kitten river garden audit model vector "
    "search index reader owner request budget report meeting contract invoice customer"
)
WORDS = VOCABULARY.split()


def sentences(count: int, words: int = 25, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "." for _ in range(count)
    ]


def main() -> None:
    provider = LocalMiniLMProvider()
    texts = sentences(512)
    started = time.perf_counter()
    provider.embed(["warm-up"])  # the first call loads and hash-checks the model
    load_seconds = time.perf_counter() - started
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        vectors = provider.embed(texts)
        runs.append(time.perf_counter() - started)
    assert len(vectors) == 512 and len(vectors[0]) == provider.dimension
    best, median = min(runs), statistics.median(runs)
    print(
        f"model {provider.model_id}, batch {provider.batch_size}, "
        f"threads {os.environ['KOINON_EMBEDDING_THREADS']}, cpus {os.cpu_count()}"
    )
    print(f"load + hash check: {load_seconds:.2f} s")
    print(f"512 sentences x 25 words: median {median:.2f} s, best {best:.2f} s")
    print(f"throughput: {512 / median:.0f} embeddings/s (median), {512 / best:.0f} (best)")


if __name__ == "__main__":
    main()
