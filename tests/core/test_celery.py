import uuid

import pytest
from django.db import connection

from knowledge.tasks import worker_probe

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_round_trips_through_the_real_worker(celery_worker, space):
    token = uuid.uuid4().hex
    result = worker_probe.delay(token).get(timeout=60)
    # The worker is another process: it echoes our token and sees our committed space.
    assert result == {
        "token": token,
        "database": connection.settings_dict["NAME"],
        "role": connection.settings_dict["USER"],
        "spaces": 1,
    }
