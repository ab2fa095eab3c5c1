"""The local provider as it was before the int8 kernels, for baselines in the same run.

The pinned graph exactly as stored (its int8 weights turned back into floats in the graph,
so ONNX Runtime runs fp32 MatMuls), texts sorted by length in batches of up to 32.
"""

import numpy as np

from knowledge import embeddings
from knowledge.embeddings import LocalMiniLMProvider

OLD_BATCH = 32
OLD_MODEL_ID = "local:all-MiniLM-L6-v2-int8"  # what the provider was called then


def use_fp32_matmuls() -> None:
    """From now on this process loads the graph unconverted and embeds as before."""
    embeddings._int8_kernels = lambda data: data
    embeddings.clear_embedding_caches()
    LocalMiniLMProvider.embed = lambda self, texts: fp32_embed(texts).tolist()
    # Its own id: cached bench embeddings and stored rows never mix the two.
    LocalMiniLMProvider.model_id = OLD_MODEL_ID


def fp32_embed(texts: list[str], batch: int = OLD_BATCH) -> np.ndarray:
    provider = LocalMiniLMProvider()
    runtime = provider._runtime()
    encodings = runtime.tokenizer.encode_batch(list(texts))
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    result = np.empty((len(texts), provider.dimension), dtype=np.float32)
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        result[chunk] = provider._run(runtime, [encodings[i] for i in chunk])
    return result / np.linalg.norm(result, axis=1, keepdims=True)
