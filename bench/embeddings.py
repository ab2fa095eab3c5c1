"""Throughput of the local embedding provider: 512 sentences of ~25 words, 1 thread.

Baseline in the same run: the pinned graph as it is stored (weights turned back into
floats, fp32 MatMuls; the model id before the int8 kernels), in batches of 2 and 32
sorted by length, as the provider ran it before. Then the provider as it is: int8
kernels, one text per inference. Also prints how far the vectors moved (cosine).

Run: .venv/bin/python bench/embeddings.py   (no database, no Django settings needed)
"""

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("KOINON_EMBEDDING_THREADS", "1")  # before the model loads

import numpy as np
from common.fp32_embedding import fp32_embed

from knowledge import embeddings
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


def timed(embed, texts: list[str]) -> tuple[float, np.ndarray]:
    """Median seconds of three runs, and the vectors."""
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        vectors = embed(texts)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs), np.asarray(vectors)


def main() -> None:
    texts = sentences(512)
    provider = LocalMiniLMProvider()
    print(f"threads {os.environ['KOINON_EMBEDDING_THREADS']}, cpus {os.cpu_count()}")
    kernels = embeddings._int8_kernels
    embeddings._int8_kernels = lambda data: data  # the graph exactly as pinned
    fp32_embed(["warm-up"])
    rows, reference = [], None
    for batch in (2, 32):
        seconds, vectors = timed(lambda t, b=batch: fp32_embed(t, b), texts)
        reference = vectors if reference is None else reference
        rows.append((f"fp32 MatMuls, batches of {batch} (baseline)", seconds))
    embeddings._int8_kernels = kernels
    embeddings.clear_embedding_caches()
    started = time.perf_counter()
    provider.embed(["warm-up"])  # loads, hash-checks and converts the model
    load_seconds = time.perf_counter() - started
    seconds, vectors = timed(provider.embed, texts)
    assert vectors.shape == (512, provider.dimension)
    rows.append((f"{provider.model_id}, one text per inference", seconds))
    print(f"load + hash check + int8 conversion: {load_seconds:.2f} s")
    base = 512 / rows[0][1]
    for name, seconds in rows:
        rate = 512 / seconds
        print(f"{name:58} {rate:6.0f} embeddings/s  {rate / base:4.2f}x")
    cosine = (vectors * reference).sum(axis=1)
    print(f"cosine to the fp32 vectors: mean {cosine.mean():.4f}, min {cosine.min():.4f}")


if __name__ == "__main__":
    main()
