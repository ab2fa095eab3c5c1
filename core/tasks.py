from celery import shared_task
from django.db import connection


@shared_task(name="core.worker_probe")
def worker_probe(token: str) -> dict:
    """Echo a token with what the worker sees of the database (and as whom): the round trip."""
    from knowledge.models import Space

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database(), current_user")
        database, role = cursor.fetchone()
    return {"token": token, "database": database, "role": role, "spaces": Space.objects.count()}
