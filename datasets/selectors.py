from django.db.models import QuerySet

from core.errors import NotFoundError
from core.inputs import object_id_parse
from core.types import UserOrAnonymous
from datasets.models import Dataset, DatasetSnapshot
from knowledge.scope import AccessScope
from knowledge.selectors import spaces_visible_to


def datasets_visible_to(*, user: UserOrAnonymous) -> QuerySet[Dataset]:
    """A dataset is visible exactly when its space is."""
    return Dataset.objects.filter(space__in=spaces_visible_to(user=user).values("pk"))


def datasets_in_scope(*, scope: AccessScope) -> QuerySet[Dataset]:
    """The datasets of the scope's spaces (a dataset is visible exactly when its space is)."""
    return Dataset.objects.filter(space_id__in=sorted(scope.space_ids))


def dataset_get_for_user(*, user: UserOrAnonymous, dataset_id: object) -> Dataset:
    """The dataset if the user may read it; NotFoundError whether missing or hidden."""
    pk = object_id_parse(dataset_id)
    dataset = datasets_visible_to(user=user).filter(pk=pk).first() if pk else None
    if dataset is None:
        raise NotFoundError("Dataset not found.")
    return dataset


def snapshot_of(*, dataset: Dataset, version: object = None) -> DatasetSnapshot:
    """The named snapshot version of a visible dataset, else its current snapshot."""
    if version in (None, ""):
        snapshot = dataset.current_snapshot
    else:
        number = object_id_parse(version)
        snapshot = dataset.snapshots.filter(version=number).first() if number else None
    if snapshot is None:
        raise NotFoundError("Snapshot not found.", code="snapshot_not_found")
    return snapshot


def snapshot_in_scope(*, scope: AccessScope, snapshot_id: object) -> DatasetSnapshot | None:
    """A snapshot of a dataset in scope; None whether missing or outside it."""
    pk = object_id_parse(snapshot_id)
    if not pk:
        return None
    return DatasetSnapshot.objects.filter(
        pk=pk, dataset__space_id__in=sorted(scope.space_ids)
    ).first()
