"""The answer log's signing key for local use (issue 33): `manage.py log key FILE` creates one
(owner-readable only) unless the file holds one, and prints only its public key; `koinon_up`
uses it, under the data directory, when KOINON_LOG_KEY_FILE is unset."""

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.signed_note import NoteSigner, NoteVerifier
from core.management.commands.koinon_up import Command as KoinonUp
from core.startlog import StartLog


def make_key(path, *args) -> str:
    out = StringIO()
    call_command("log", "key", str(path), *args, stdout=out)
    return out.getvalue()


def test_it_creates_a_key_readable_by_its_owner_only_and_prints_only_the_public_key(tmp_path):
    path = tmp_path / "log.key"
    said = make_key(path)
    signer = NoteSigner.from_key(path.read_text().strip())
    assert path.stat().st_mode & 0o777 == 0o600
    assert said.startswith("created") and signer.verifier().key_string() in said
    assert signer.key_string() not in said and "PRIVATE" not in said
    assert NoteVerifier.from_key(said.split()[-1]) == signer.verifier()


def test_it_keeps_a_key_already_there(tmp_path):
    path = tmp_path / "log.key"
    make_key(path, "--origin", "example.org/answers")
    before = path.read_text()
    said = make_key(path)
    assert said.startswith("kept") and path.read_text() == before
    assert "example.org/answers+" in said


def test_a_file_without_a_key_or_a_bad_origin_is_a_command_error(tmp_path):
    junk = tmp_path / "junk.key"
    junk.write_text("not a key\n")
    with pytest.raises(CommandError, match="holds no note signer key"):
        make_key(junk)
    with pytest.raises(CommandError, match="invalid key name"):
        make_key(tmp_path / "new.key", "--origin", "two words")
    assert not (tmp_path / "new.key").exists()


def koinon_up(data_dir) -> KoinonUp:
    """The command as its start has set it up: what it says goes to a StringIO (and the log)."""
    up = KoinonUp(stdout=StringIO())
    up._log = StartLog(data_dir, up.stdout)
    return up


def test_koinon_up_creates_one_under_the_data_directory_when_none_is_configured(tmp_path, settings):
    settings.KOINON_LOG_KEY_FILE = ""
    settings.DATA_DIR = tmp_path
    up = koinon_up(tmp_path)
    path = up._ensure_log_key()
    assert path == str(tmp_path / "log.key")
    key = NoteSigner.from_key((tmp_path / "log.key").read_text().strip())
    said = up.stdout.getvalue()
    assert "answer log key (local use" in said and key.verifier().key_string() in said
    assert key.key_string() not in said
    # Started again, the settings name that same file (the default once it exists): it is
    # still the local key, said so, and kept.
    settings.KOINON_LOG_KEY_FILE = str(tmp_path / "log.key")
    again = koinon_up(tmp_path)
    assert again._ensure_log_key() == str(tmp_path / "log.key")
    assert "answer log key (local use" in again.stdout.getvalue()
    assert NoteSigner.from_key((tmp_path / "log.key").read_text().strip()) == key
    # A configured key is used as it is: nothing created.
    settings.KOINON_LOG_KEY_FILE = str(tmp_path / "mine.key")
    assert koinon_up(tmp_path)._ensure_log_key() == str(tmp_path / "mine.key")
    assert not (tmp_path / "mine.key").exists()


def log_key_setting(data_dir, **environment) -> str:
    """KOINON_LOG_KEY_FILE as a manage.py command started with `environment` sees it, under
    the real (not the test) settings and the data directory `data_dir`."""
    env = {k: v for k, v in os.environ.items() if k != "KOINON_LOG_KEY_FILE"}
    env |= {"KOINON_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "koinon.settings"}
    code = "import django; django.setup(); from django.conf import settings as s; "
    code += "print(s.KOINON_LOG_KEY_FILE)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env | environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return result.stdout.strip()


def test_every_command_signs_and_verifies_with_the_key_koinon_up_keeps(tmp_path):
    """Right after `make run` no environment is set: `log verify`, `verify_export` and every
    other command read the key `koinon_up` made in the data directory (issue 51)."""
    assert log_key_setting(tmp_path) == ""  # none made yet: nothing is signed
    make_key(tmp_path / "log.key")
    assert log_key_setting(tmp_path) == str(tmp_path / "log.key")
    mine = str(tmp_path / "mine.key")
    assert log_key_setting(tmp_path, KOINON_LOG_KEY_FILE=mine) == mine
