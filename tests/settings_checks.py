"""Starting Django with one setting from the environment, in a fresh interpreter."""

import os
import subprocess
import sys


def django_setup_with(variable: str, value: str) -> subprocess.CompletedProcess:
    """`django.setup()` with `variable=value` under the real (not the test) settings."""
    environment = {**os.environ, variable: value, "DJANGO_SETTINGS_MODULE": "koinon.settings"}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
