"""Model fields read by name, for the raw SQL that names their columns."""

from django.core.exceptions import FieldDoesNotExist
from django.db.models import Field, Model


def concrete_field(model: type[Model], name: str) -> Field[object, object]:
    """The model's field `name` that has a column (a foreign key included); a reverse
    relation, which has none, raises FieldDoesNotExist."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field):
        raise FieldDoesNotExist(f"{model.__name__}.{name} has no column")
    return field


def column_name(model: type[Model], name: str) -> str:
    """The column of the model's field `name`."""
    column = concrete_field(model, name).column
    if column is None:
        raise FieldDoesNotExist(f"{model.__name__}.{name} has no column")
    return column
