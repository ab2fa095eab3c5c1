"""`manage.py log witness DIR` (audit.log_witness): every new checkpoint kept once in a
directory outside the database, each only after the log's tree of its size is shown to
extend the newest one kept; a rewritten log, a forked checkpoint or a file the key did not
sign is a PROBLEM line and a non-zero exit, with nothing written."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.checkpoint import Checkpoint, checkpoint_open, checkpoint_sign
from audit.log import log_integrate
from audit.merkle import leaf_hash
from audit.models import LogCheckpoint
from audit.signed_note import NoteSigner
from tests.audit.helpers import ORIGIN, SWAP, as_owner, more_releases


def witness(directory) -> tuple[bool, str]:
    out = StringIO()
    try:
        call_command("log", "witness", str(directory), stdout=out)
    except CommandError:
        return False, out.getvalue()
    return True, out.getvalue()


def kept(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.django_db
def test_it_keeps_each_new_checkpoint_once_one_file_per_size(published, log_key, tmp_path):
    directory = tmp_path / "witness"
    more_releases(2)
    log_integrate()
    ok, out = witness(directory)
    assert ok and "1 new checkpoints kept, the newest kept: size 3" in out, out
    more_releases(1)
    log_integrate()
    more_releases(2)
    log_integrate()
    ok, out = witness(directory)
    assert ok and "2 new checkpoints kept, the newest kept: size 6" in out, out
    assert kept(directory) == ["3.checkpoint", "4.checkpoint", "6.checkpoint"]
    for size in (3, 4, 6):
        note = (directory / f"{size}.checkpoint").read_text()
        assert note == LogCheckpoint.objects.get(size=size).note
        assert checkpoint_open(note, verifier=log_key.verifier()).size == size
    ok, out = witness(directory)
    assert ok and "0 new checkpoints kept" in out
    # What it keeps is what `log verify` checks the log against.
    files = [arg for p in sorted(directory.iterdir()) for arg in ("--checkpoint", str(p))]
    call_command("log", "verify", *files, stdout=StringIO())


@pytest.mark.django_db
def test_it_refuses_a_checkpoint_of_a_log_rewritten_since_the_newest_kept(
    published, log_key, tmp_path
):
    directory = tmp_path / "witness"
    more_releases(5)
    log_integrate()
    assert witness(directory)[0]
    # The database owner swaps two receipts' entries and removes the stored subtrees; the
    # next integration refills them from the rewritten entries and the server signs
    # whatever the tables hold: a checkpoint of 9 over the rewritten log, with its own key.
    as_owner(SWAP, "DELETE FROM audit_logsubtree")
    more_releases(3)
    log_integrate()
    assert LogCheckpoint.objects.filter(size=9).exists()
    ok, out = witness(directory)
    assert not ok
    assert (
        "PROBLEM stored checkpoint of size 9: not consistent with the kept checkpoint of size 6"
        in out
    ), out
    assert kept(directory) == ["6.checkpoint"]  # nothing written


@pytest.mark.django_db
def test_it_reads_the_entries_afresh_not_the_stored_subtrees(published, log_key, tmp_path):
    directory = tmp_path / "witness"
    more_releases(5)
    log_integrate()
    assert witness(directory)[0]
    # Entries swapped, stored subtrees left: the server signs the size-9 root from its stored
    # subtrees (the tree before the swap); the witness, rebuilding from the entries, differs.
    as_owner(SWAP)
    more_releases(3)
    log_integrate()
    ok, out = witness(directory)
    assert not ok
    assert "PROBLEM stored checkpoint of size 9: the stored entries give another root" in out
    assert kept(directory) == ["6.checkpoint"]


@pytest.mark.django_db
def test_it_reports_a_stored_checkpoint_forking_a_kept_one(published, log_key, tmp_path):
    directory = tmp_path / "witness"
    log_integrate()
    assert witness(directory)[0]
    kept_note = (directory / "1.checkpoint").read_text()
    fork = checkpoint_sign(Checkpoint(ORIGIN, 1, leaf_hash(b"another history")), signer=log_key)
    as_owner(("UPDATE audit_logcheckpoint SET note = %s WHERE size = 1", [fork]))
    ok, out = witness(directory)
    assert not ok and "another root than the one kept (a fork)" in out, out
    assert (directory / "1.checkpoint").read_text() == kept_note


@pytest.mark.django_db
def test_a_kept_file_the_key_did_not_sign_is_a_problem(published, log_key, tmp_path):
    directory = tmp_path / "witness"
    directory.mkdir()
    log_integrate()
    stolen = checkpoint_open(LogCheckpoint.objects.get().note, verifier=log_key.verifier())
    forged = checkpoint_sign(stolen, signer=NoteSigner.generate(ORIGIN))
    (directory / "1.checkpoint").write_text(forged)
    ok, out = witness(directory)
    assert not ok and "PROBLEM 1.checkpoint: not one the log's key signed" in out, out


@pytest.mark.django_db
def test_it_needs_a_directory_it_can_use_and_the_key(published, tmp_path, settings):
    with pytest.raises(CommandError, match="needs the directory"):
        call_command("log", "witness", stdout=StringIO())
    settings.KOINON_LOG_KEY_FILE = ""
    with pytest.raises(CommandError, match="KOINON_LOG_KEY_FILE"):
        call_command("log", "witness", str(tmp_path / "w"), stdout=StringIO())


@pytest.mark.django_db
def test_a_directory_that_cannot_be_made_is_a_command_error(published, log_key, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(CommandError, match="cannot be used"):
        call_command("log", "witness", str(blocker / "w"), stdout=StringIO())
