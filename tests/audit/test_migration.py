import pytest
from django.core.management import call_command
from django.db import connection


def triggers() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'audit_outputrelease'::regclass "
            "AND NOT tgisinternal"
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_the_release_migration_reverses_and_reapplies_cleanly():
    expected = {"audit_release_no_update", "audit_release_no_delete", "audit_release_no_truncate"}
    assert triggers() == expected
    call_command("migrate", "audit", "0001", verbosity=0)
    assert triggers() == set()
    # Forward again, and every app whose migrations depend on the release table with it
    # (going back to audit 0001 unapplied them too).
    call_command("migrate", verbosity=0)
    assert triggers() == expected
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT bool_and(NOT condeferrable) FROM pg_constraint "
            "WHERE conrelid = 'audit_outputrelease'::regclass AND contype = 'f'"
        )
        assert cursor.fetchone() == (True,)
