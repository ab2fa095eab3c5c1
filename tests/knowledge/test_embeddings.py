"""Embedding providers: the offline MiniLM for real, and the OpenAI client over real HTTP.

None of these tests touch the database.
"""

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from knowledge import embeddings
from knowledge.embeddings import (
    EmbeddingError,
    EmbeddingProvider,
    LocalMiniLMProvider,
    OpenAIEmbeddingProvider,
    clear_embedding_caches,
    get_embedding_provider,
)
from tests.guards import no_hang


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm(a) * norm(b))


# --- local provider ---------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalMiniLMProvider:
    return LocalMiniLMProvider()


@pytest.fixture
def fresh_model() -> Iterator[None]:
    """Forces a reload before the test and after it (so later tests get the real model back)."""
    clear_embedding_caches()
    yield
    clear_embedding_caches()


def test_local_provider_satisfies_the_protocol(local: LocalMiniLMProvider) -> None:
    assert isinstance(local, EmbeddingProvider)
    assert local.model_id == "local:all-MiniLM-L6-v2-int8-kernels"
    assert local.dimension == 384
    assert local.embed([]) == []


def test_local_many_texts_keep_input_order_and_each_vector_is_the_text_alone(
    local: LocalMiniLMProvider,
) -> None:
    texts = [f"Sentence number {i} " + "about gardens and rivers " * (i % 7) for i in range(40)]
    vectors = local.embed(texts)
    assert len(vectors) == 40
    for text, vector in zip(texts, vectors, strict=True):
        assert len(vector) == 384
        assert abs(norm(vector) - 1.0) < 1e-3
        assert vector == local.embed([text])[0]


def test_local_semantics(local: LocalMiniLMProvider) -> None:
    cat, kitten, revenue = local.embed(
        [
            "The cat sits on the mat",
            "A kitten is sitting on a rug",
            "Quarterly revenue grew by ten percent",
        ]
    )
    assert cosine(cat, kitten) > cosine(cat, revenue) + 0.3


def test_local_is_deterministic_and_padding_does_not_change_vectors(
    local: LocalMiniLMProvider,
) -> None:
    text = "Padding must not leak into the mean."
    alone = local.embed([text])[0]
    assert local.embed([text])[0] == alone
    long_texts = ["A much longer neighbour in the same batch, with many more tokens " * 3]
    beyond_limit = " ".join(["overflow"] * 600)  # truncated to 256 tokens, must not fail
    batched = local.embed([*long_texts, text, beyond_limit])
    # Exactly: int8 kernels quantise a batch with one scale, so neighbours must not share one.
    assert batched[1] == alone
    assert abs(norm(batched[2]) - 1.0) < 1e-3


def test_the_weight_matmuls_run_on_int8_kernels_with_the_pinned_weights() -> None:
    import onnx
    from onnx import numpy_helper

    pinned = embeddings.pinned_package_file(
        embeddings.MODEL_PACKAGE, embeddings.MODEL_FILE, embeddings.MODEL_SHA256
    )
    stored, converted = (
        onnx.load_from_string(pinned),
        onnx.load_from_string(embeddings._int8_kernels(pinned)),
    )
    kernels = [node for node in converted.graph.node if node.op_type == "DynamicQuantizeMatMul"]
    assert len(kernels) == embeddings.INT8_MATMULS == 36
    # No MatMul multiplies by a weight turned back into floats any more (the embedding
    # tables, which are gathered and not multiplied, still are).
    initializers = {tensor.name: tensor for tensor in converted.graph.initializer}
    producer = {output: node for node in converted.graph.node for output in node.output}

    def from_int8_weight(name: str, depth: int = 3) -> bool:
        tensor = initializers.get(name)
        if tensor is not None:
            return tensor.data_type == onnx.TensorProto.INT8
        node = producer.get(name)
        return bool(depth and node) and any(from_int8_weight(i, depth - 1) for i in node.input)

    matmuls = [node for node in converted.graph.node if node.op_type == "MatMul"]
    assert not [node for node in matmuls if from_int8_weight(node.input[1])]
    stored_matmuls = [node for node in stored.graph.node if node.op_type == "MatMul"]
    assert len(stored_matmuls) - len(matmuls) == 36  # the 12 left multiply activations
    # The kernels read the very int8 weights that were pinned, unchanged.
    pinned_weights = {
        tensor.name: numpy_helper.to_array(tensor)
        for tensor in stored.graph.initializer
        if tensor.data_type == onnx.TensorProto.INT8
    }
    for node in kernels:
        weight = numpy_helper.to_array(initializers[node.input[1]])
        assert (weight == pinned_weights[node.input[1]]).all()


@pytest.mark.usefixtures("fresh_model")
def test_int8_kernel_vectors_stay_close_to_the_fp32_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [
        "The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad Röntgen.",
        "Quarterly revenue grew by ten percent.",
        "A kitten is sitting on a rug",
    ]
    kernels = LocalMiniLMProvider().embed(texts)
    clear_embedding_caches()
    monkeypatch.setattr(embeddings, "_int8_kernels", lambda data: data)
    fp32 = LocalMiniLMProvider().embed(texts)
    for a, b in zip(kernels, fp32, strict=True):
        assert 0.97 < cosine(a, b) < 0.99999  # close, and not the same graph


@pytest.mark.usefixtures("fresh_model")
def test_a_graph_that_is_not_fully_converted_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "INT8_MATMULS", 37)
    with pytest.raises(EmbeddingError) as caught:
        LocalMiniLMProvider().embed(["hello"])
    assert caught.value.code == "embedding_unavailable"


@pytest.mark.usefixtures("fresh_model")
def test_tampered_hash_makes_the_local_model_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "MODEL_SHA256", "0" * 64)
    with pytest.raises(EmbeddingError) as caught:
        LocalMiniLMProvider().embed(["hello"])
    assert caught.value.code == "embedding_unavailable"
    message = str(caught.value)
    assert "/" not in message and "\\" not in message
    assert "model.onnx" not in message and "site-packages" not in message


@pytest.mark.usefixtures("fresh_model")
def test_missing_model_file_makes_the_local_model_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embeddings, "TOKENIZER_FILE", "model/no-such-tokenizer.json")
    with pytest.raises(EmbeddingError) as caught:
        LocalMiniLMProvider().embed(["hello"])
    assert caught.value.code == "embedding_unavailable"
    assert "no-such-tokenizer" not in str(caught.value)


@pytest.mark.usefixtures("fresh_model")
def test_invalid_thread_count_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOINON_EMBEDDING_THREADS", "zero")
    with pytest.raises(EmbeddingError) as caught:
        LocalMiniLMProvider().embed(["hello"])
    assert caught.value.code == "embedding_configuration_invalid"


@pytest.mark.usefixtures("fresh_model")
def test_concurrent_first_calls_load_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = []

    class CountingRuntime(embeddings._LocalRuntime):
        def __init__(self, max_tokens: int) -> None:
            loads.append(1)
            super().__init__(max_tokens)

    monkeypatch.setattr(embeddings, "_LocalRuntime", CountingRuntime)
    results: list[list[list[float]]] = []
    threads = [
        threading.Thread(target=lambda: results.append(LocalMiniLMProvider().embed(["same"])))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1
    assert len(results) == 4 and all(result == results[0] for result in results)


# --- a fake OpenAI-compatible server over real HTTP --------------------------------

API_KEY = "test-key"
SECRET_DETAIL = "upstream-secret-detail-7f3a"

# (request number from 1, parsed JSON body) -> (status, response bytes, seconds to wait first)
Behaviour = Callable[[int, dict], tuple[int, bytes, float]]


def embeddings_answer(body: dict, dimension: int = 8) -> bytes:
    """The real wire format, items in reversed index order; input i maps to [i+1, 1, 1, ...]."""
    data = [
        {"object": "embedding", "index": i, "embedding": [float(i + 1)] + [1.0] * (dimension - 1)}
        for i in range(len(body["input"]))
    ]
    answer = {"object": "list", "data": data[::-1], "model": body["model"], "usage": {}}
    return json.dumps(answer).encode()


@dataclass
class FakeServer:
    url: str
    behaviour: Behaviour
    requests: list[dict] = field(default_factory=list)


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    fake = FakeServer(url="", behaviour=lambda n, body: (200, embeddings_answer(body), 0.0))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                fake.requests.append(body)
                number = len(fake.requests)
            if self.path != "/v1/embeddings":
                status, payload, delay = 404, b'{"error": "not found"}', 0.0
            elif self.headers.get("Authorization") != f"Bearer {API_KEY}":
                status, payload, delay = 401, b'{"error": {"message": "bad key"}}', 0.0
            else:
                status, payload, delay = fake.behaviour(number, body)
            time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (timeout test)
                pass

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def client(fake: FakeServer, **options: object) -> OpenAIEmbeddingProvider:
    provider = OpenAIEmbeddingProvider(
        base_url=fake.url, model="fake-embed", api_key=API_KEY, **options
    )
    provider.backoff_seconds = 0.01  # keep retry tests fast
    return provider


def test_openai_success_is_normalised_and_ordered(fake_server: FakeServer) -> None:
    provider = client(fake_server, dimension=8)
    assert isinstance(provider, EmbeddingProvider)
    assert provider.model_id == "openai:fake-embed"
    vectors = provider.embed(["a", "b", "c"])
    assert fake_server.requests == [{"model": "fake-embed", "input": ["a", "b", "c"]}]
    assert len(vectors) == 3
    for i, vector in enumerate(vectors):
        assert abs(norm(vector) - 1.0) < 1e-9
        assert vector[0] == pytest.approx((i + 1) / math.sqrt((i + 1) ** 2 + 7))
    assert provider.embed([]) == []
    assert len(fake_server.requests) == 1


def test_openai_learns_the_dimension_when_not_configured(fake_server: FakeServer) -> None:
    assert client(fake_server).dimension == 8


def test_openai_retries_a_500_then_succeeds(fake_server: FakeServer) -> None:
    def flaky(number: int, body: dict) -> tuple[int, bytes, float]:
        if number == 1:
            return 500, b'{"error": "warming up"}', 0.0
        return 200, embeddings_answer(body), 0.0

    fake_server.behaviour = flaky
    vectors = client(fake_server, retries=2).embed(["x", "y"])
    assert len(vectors) == 2
    assert len(fake_server.requests) == 2


def test_openai_persistent_500_is_unavailable_without_leaking(fake_server: FakeServer) -> None:
    fake_server.behaviour = lambda n, body: (500, SECRET_DETAIL.encode(), 0.0)
    with pytest.raises(EmbeddingError) as caught:
        client(fake_server, retries=2).embed(["x"])
    assert caught.value.code == "embedding_unavailable"
    assert SECRET_DETAIL not in str(caught.value)
    assert "127.0.0.1" not in str(caught.value)
    assert len(fake_server.requests) == 3


def test_openai_client_error_is_unavailable_and_not_retried(fake_server: FakeServer) -> None:
    provider = OpenAIEmbeddingProvider(base_url=fake_server.url, model="m", api_key="wrong")
    with pytest.raises(EmbeddingError) as caught:
        provider.embed(["x"])
    assert caught.value.code == "embedding_unavailable"
    assert "wrong" not in str(caught.value)
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize(
    "payload",
    [
        b"{not json",
        b'{"object": "list"}',
        b'{"data": [{"index": 0, "embedding": ["1", "2"]}]}',
        b'{"data": [{"index": 5, "embedding": [1.0, 2.0]}]}',  # wrong count / indices
    ],
)
def test_openai_malformed_answer_is_unavailable(fake_server: FakeServer, payload: bytes) -> None:
    fake_server.behaviour = lambda n, body: (200, payload, 0.0)
    with pytest.raises(EmbeddingError) as caught:
        client(fake_server).embed(["x"])
    assert caught.value.code == "embedding_unavailable"


def test_openai_wrong_dimension_is_a_configuration_error(fake_server: FakeServer) -> None:
    with pytest.raises(EmbeddingError) as caught:
        client(fake_server, dimension=1536).embed(["x"])
    assert caught.value.code == "embedding_configuration_invalid"


def test_openai_timeout_is_unavailable(fake_server: FakeServer) -> None:
    # The server would answer after 3 s; a client that ignored its 0.3 s timeout would
    # wait 6 s for the two tries: the guard (far above 2 × 0.3 s) catches that.
    fake_server.behaviour = lambda n, body: (200, embeddings_answer(body), 3.0)
    with no_hang(5), pytest.raises(EmbeddingError) as caught:
        client(fake_server, timeout=0.3, retries=1).embed(["x"])
    assert caught.value.code == "embedding_unavailable"
    assert len(fake_server.requests) == 2  # a timeout is retried too


def test_openai_connection_refused_is_unavailable() -> None:
    provider = OpenAIEmbeddingProvider(base_url="http://127.0.0.1:9/v1", model="m", retries=0)
    with pytest.raises(EmbeddingError) as caught:
        provider.embed(["x"])
    assert caught.value.code == "embedding_unavailable"
    assert "127.0.0.1" not in str(caught.value)


def test_openai_base_url_must_be_http() -> None:
    with pytest.raises(EmbeddingError) as caught:
        OpenAIEmbeddingProvider(base_url="localhost:8080/v1", model="m")
    assert caught.value.code == "embedding_configuration_invalid"


# --- selection from settings -----------------------------------------------------


@pytest.fixture
def fresh_providers() -> Iterator[None]:
    clear_embedding_caches()
    yield
    clear_embedding_caches()


@pytest.mark.usefixtures("fresh_providers")
def test_openai_without_base_url_is_a_configuration_error(settings) -> None:
    settings.KOINON_EMBEDDING_PROVIDER = "openai"
    settings.KOINON_EMBEDDING_BASE_URL = ""
    settings.KOINON_EMBEDDING_MODEL = "text-embedding-3-small"
    with pytest.raises(EmbeddingError) as caught:
        get_embedding_provider()
    assert caught.value.code == "embedding_configuration_invalid"


@pytest.mark.usefixtures("fresh_providers")
def test_local_with_another_dimension_is_a_configuration_error(settings) -> None:
    settings.KOINON_EMBEDDING_PROVIDER = "local"
    settings.KOINON_EMBEDDING_DIMENSION = 1536
    with pytest.raises(EmbeddingError) as caught:
        get_embedding_provider()
    assert caught.value.code == "embedding_configuration_invalid"


@pytest.mark.usefixtures("fresh_providers")
def test_providers_are_cached_per_configuration(settings, fake_server: FakeServer) -> None:
    settings.KOINON_EMBEDDING_PROVIDER = "local"
    assert get_embedding_provider() is get_embedding_provider()
    assert isinstance(get_embedding_provider(), LocalMiniLMProvider)
    settings.KOINON_EMBEDDING_PROVIDER = "openai"
    settings.KOINON_EMBEDDING_BASE_URL = fake_server.url
    settings.KOINON_EMBEDDING_MODEL = "fake-embed"
    settings.KOINON_EMBEDDING_API_KEY = API_KEY
    settings.KOINON_EMBEDDING_DIMENSION = 8
    provider = get_embedding_provider()
    assert provider is get_embedding_provider()
    assert provider.model_id == "openai:fake-embed"
    assert len(provider.embed(["x"])[0]) == 8
