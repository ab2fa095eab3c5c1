"""The model provider's settings are checked at start, naming the variable and never
echoing its value."""

import os
import subprocess
import sys

import pytest

from tests.services import ROOT


def settings_load(**environ: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOINON_LLM_")}
    env.pop("KOINON_MODEL_PROVIDER", None)
    env.update(environ, DJANGO_SETTINGS_MODULE="koinon.settings_test")
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"KOINON_MODEL_PROVIDER": "openai"}, "KOINON_LLM_BASE_URL"),
        (
            {
                "KOINON_MODEL_PROVIDER": "openai",
                "KOINON_LLM_MODEL": "m",
                "KOINON_LLM_BASE_URL": "ftp://models.example/v1",
            },
            "KOINON_LLM_BASE_URL",
        ),
        (
            {
                "KOINON_MODEL_PROVIDER": "openai",
                "KOINON_LLM_MODEL": "m",
                "KOINON_LLM_BASE_URL": "https://user:s3cret-key@models.example/v1",
            },
            "KOINON_LLM_BASE_URL",
        ),
        ({"KOINON_LLM_TIMEOUT": "0"}, "KOINON_LLM_TIMEOUT"),
        ({"KOINON_LLM_RETRIES": "9"}, "KOINON_LLM_RETRIES"),
        ({"KOINON_LLM_MAX_TOKENS": "lots"}, "KOINON_LLM_MAX_TOKENS"),
        ({"KOINON_LLM_GGUF": "/nonexistent/s3cret-model.gguf"}, "KOINON_LLM_GGUF"),
        (
            {"KOINON_LLM_GGUF": "/nonexistent/m.gguf", "KOINON_MODEL_PROVIDER": "extractive"},
            "KOINON_LLM_GGUF",
        ),
    ],
)
def test_a_bad_model_setting_stops_start_up_naming_the_variable(environ, named):
    result = settings_load(**environ)
    assert result.returncode != 0
    assert named in result.stderr
    assert "s3cret" not in result.stderr


def test_a_complete_openai_configuration_starts():
    result = settings_load(
        KOINON_MODEL_PROVIDER="openai",
        KOINON_LLM_BASE_URL="http://127.0.0.1:11434/v1",
        KOINON_LLM_MODEL="qwen2.5",
        KOINON_LLM_API_KEY="sk-example",
    )
    assert result.returncode == 0, result.stderr[-500:]
