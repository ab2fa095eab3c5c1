"""What one reader may read in one run or one call, read once and passed explicitly.

An answer filters many statements by the same permission (the plan's datasets, memory, both
retrieval channels, the document frequencies, the dataset queries). An `AccessScope` reads
the rows that grant it once, through the selectors' rules (`spaces_visible_to`,
`private_files_of`), and every later statement filters by the ids it holds, so a reader of
any statement sees what it filters by. It is a value: built per run (`access_scope_build`),
again by the publication's recheck under its locks, and per call by MCP's search; never
cached on a user object or in ambient state. A role removed while a run gathers still
counts for that run's gathering; the recheck, which builds a fresh scope after locking the
permission rows, is what refuses to publish then.

`database` is where the scope was read and where its statements run: `default` (the
primary), or for an answer run's gathering a streaming replica (core.replicas), whose rows
the recheck on the primary checks again before anything is published.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q, QuerySet

from core.replicas import replica_read
from core.types import UserOrAnonymous
from knowledge.models import Document, Passage
from knowledge.selectors import private_files_of, spaces_visible_to


@dataclass(frozen=True)
class AccessScope:
    """The spaces and private files one reader may read here.

    `space_ids`: the visible spaces, narrowed to the chosen ones when some were chosen;
    `every_space`: none were chosen (every visible space is searched); `file_ids`: the
    reader's own private files among those selected (a private file is read only when
    selected)."""

    user_id: int | None
    space_ids: frozenset[int]
    file_ids: frozenset[int]
    every_space: bool
    database: str = DEFAULT_DB_ALIAS
    # The strictest support-judge threshold a curator set on these spaces (Space.
    # operating_point), read in the same statement as the spaces; None: none set.
    operating_point: float | None = None

    @property
    def empty(self) -> bool:
        return not self.space_ids and not self.file_ids

    def passages(self) -> QuerySet[Passage]:
        """Passages of current revisions in scope."""
        return Passage.objects.using(self.database).filter(
            self._of_spaces_or_files("document_id"), is_current=True
        )

    def documents(self) -> QuerySet[Document]:
        """Documents in scope (withdrawn ones included: callers decide about those)."""
        return Document.objects.using(self.database).filter(self._of_spaces_or_files("pk"))

    def read[T](self, read: Callable[["AccessScope"], T]) -> T:
        """`read(scope)` on this scope's database; when that is a replica and it fails the
        read, once more with the same scope on the primary (core.replicas.replica_read)."""
        return replica_read(
            lambda database: read(replace(self, database=database)), database=self.database
        )

    def _of_spaces_or_files(self, document: str) -> Q:
        scope = Q(space_id__in=sorted(self.space_ids)) if self.space_ids else Q(pk__in=[])
        if self.file_ids:
            owned = {"owner_id": self.user_id, "space__isnull": True}
            scope |= Q(**{f"{document}__in": sorted(self.file_ids)}, **owned)
        return scope


def access_scope_build(
    *,
    user: UserOrAnonymous,
    space_ids: list[int] | None = None,
    selected_sources: list[int] | None = None,
    database: str = DEFAULT_DB_ALIAS,
) -> AccessScope:
    """The reader's scope as the permission rows grant it now: one statement for the
    spaces, one more when private files are selected. An inactive or anonymous user's
    scope is empty. `space_ids` and `selected_sources` are a request's choice (unchecked
    ids): only the visible spaces and the reader's own files among them count. `database`:
    where the permission rows are read (a replica only for a run's gathering). The same
    statement reads the spaces' operating points (the strictest is kept)."""
    spaces = spaces_visible_to(user=user).using(database)
    if space_ids:
        spaces = spaces.filter(pk__in=space_ids)
    files: frozenset[int] = frozenset()
    if selected_sources:
        own = private_files_of(user=user).using(database).filter(pk__in=selected_sources).order_by()
        files = frozenset(own.values_list("pk", flat=True))
    rows = list(spaces.order_by().values_list("pk", "operating_point"))
    points = [point for _, point in rows if point is not None]
    return AccessScope(
        user_id=user.pk,
        space_ids=frozenset(pk for pk, _ in rows),
        file_ids=files,
        every_space=not space_ids,
        database=database,
        operating_point=max(points) if points else None,
    )
