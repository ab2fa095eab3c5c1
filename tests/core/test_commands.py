from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_user_create_makes_a_key_only_user_by_default():
    out = StringIO()
    call_command("user", "create", "carol", stdout=out)
    carol = get_user_model().objects.get(username="carol")
    assert (carol.is_active, carol.is_staff, carol.has_usable_password()) == (True, False, False)
    assert "no password: use API keys" in out.getvalue()


def test_user_create_reads_the_password_from_stdin(monkeypatch):
    monkeypatch.setattr("sys.stdin", StringIO("a long passphrase here\n"))
    call_command("user", "create", "dave", "--staff", "--password-stdin", stdout=StringIO())
    dave = get_user_model().objects.get(username="dave")
    assert dave.is_staff and not dave.is_superuser
    assert dave.check_password("a long passphrase here")


def test_user_create_refuses_a_taken_name_a_bad_name_and_a_weak_password(monkeypatch):
    call_command("user", "create", "erin", stdout=StringIO())
    with pytest.raises(CommandError, match="user_exists"):
        call_command("user", "create", "erin")
    with pytest.raises(CommandError, match="invalid_username"):
        call_command("user", "create", "no spaces allowed")
    monkeypatch.setattr("sys.stdin", StringIO("password\n"))
    with pytest.raises(CommandError, match="invalid_password"):
        call_command("user", "create", "frank", "--password-stdin")
    assert not get_user_model().objects.filter(username="frank").exists()
