from dataclasses import dataclass

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import HnswIndex, VectorField

from knowledge.extraction.base import error_message
from knowledge.extraction.damage import extraction_is_damaged

# all-MiniLM-L6-v2, the default local embedding model. Another model with another
# dimension needs a migration; a query with a different model is refused.
EMBEDDING_DIMENSION = 384


class Space(models.Model):
    """The permission boundary: readers hold view_space, curators also curate_space."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The support judge's threshold a curator chose for answers from this space (from a
    # question set's curve: answers.question_sets.space_operating_point_set, which refuses a
    # point below the policy's floor). Null: the policy's pinned point. A run judges at the
    # floor or the strictest point of the spaces it reads, whichever is higher.
    operating_point = models.FloatField(null=True, blank=True)
    operating_point_set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    operating_point_set_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        permissions = [("curate_space", "Can curate the space (review proposals, manage members)")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(operating_point__isnull=True)
                | models.Q(operating_point__gt=0, operating_point__lt=1),
                name="space_operating_point_is_a_probability",
            )
        ]

    def __str__(self) -> str:
        return self.name


class DocumentKind(models.TextChoices):
    PDF = "pdf", "PDF"
    DOCX = "docx", "Word document"
    HTML = "html", "HTML"
    MARKDOWN = "markdown", "Markdown"
    TEXT = "text", "Plain text"
    VTT = "vtt", "WebVTT transcript"
    SRT = "srt", "SubRip transcript"
    KNOWLEDGE = "knowledge", "Curated knowledge"


class DocumentOrigin(models.TextChoices):
    UPLOAD = "upload", "Uploaded"
    # Text an outside channel fetched for one asker (outside.models.Snapshot): a private
    # document of theirs that is never one of their files and never searched as one.
    OUTSIDE = "outside", "Outside snapshot"


class Document(models.Model):
    """A document in a space, or a private file of one owner (exactly one of the two)."""

    space = models.ForeignKey(
        Space, on_delete=models.PROTECT, null=True, blank=True, related_name="documents"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="private_documents",
    )
    title = models.CharField(max_length=300)
    kind = models.CharField(max_length=16, choices=DocumentKind.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    current_revision = models.ForeignKey(
        "DocumentRevision", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # Withdrawn (knowledge.lifecycle): out of the current library, history kept; null = in it.
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    withdrawn_reason = models.CharField(max_length=500, blank=True, default="")
    origin = models.CharField(
        max_length=16, choices=DocumentOrigin.choices, default=DocumentOrigin.UPLOAD
    )

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(space__isnull=False, owner__isnull=True)
                    | models.Q(space__isnull=True, owner__isnull=False)
                ),
                name="document_in_space_xor_private",
            ),
            models.CheckConstraint(
                condition=models.Q(origin="upload") | models.Q(owner__isnull=False),
                name="document_outside_snapshot_is_private",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_private(self) -> bool:
        return self.owner_id is not None

    @property
    def is_withdrawn(self) -> bool:
        return self.withdrawn_at is not None


class DocumentRevision(models.Model):
    """Immutable bytes of a document; identical bytes never make a second revision."""

    document = models.ForeignKey(Document, on_delete=models.PROTECT, related_name="revisions")
    number = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    file = models.FileField(upload_to="revisions/%Y/%m/")
    filename = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["document_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["document", "number"], name="revision_number_unique"),
            models.UniqueConstraint(fields=["document", "sha256"], name="revision_bytes_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.document} r{self.number}"

    @property
    def text_damage(self) -> "TextDamage | None":
        """The damage of the text passages are cut from, or None when there is nothing to
        say: the serving extraction itself is damaged (`serving_damaged`), or a damaged
        primary gave way to a clean extraction (`damage` is then the primary's).

        Reads `extractions.all()`: prefetch them when listing revisions.
        """
        extractions = list(self.extractions.all())
        serving = next((e for e in extractions if e.serves_passages), None)
        if serving is None:
            return None
        if serving.is_damaged:
            return TextDamage(True, serving.damage or 0, serving.role, serving.extractor)
        primary = next((e for e in extractions if e.role == ExtractionRole.PRIMARY), None)
        if serving.role != ExtractionRole.PRIMARY and primary is not None:
            return TextDamage(False, primary.damage or 0, serving.role, serving.extractor)
        return None

    @property
    def text_warning(self) -> str:
        """What curators should know about the text passages are cut from ("" if nothing),
        in English for the API and admin (the library page words `text_damage` in the
        reader's language)."""
        damage = self.text_damage
        if damage is None:
            return ""
        if damage.serving_damaged:
            return (
                f"The text looks damaged ({damage.share:.0%} of its words glued) and no "
                "clean extraction serves instead: passages and quotes may show words run "
                "together."
            )
        return (
            f"The primary extraction looks damaged ({damage.share:.0%} of its words "
            f"glued): passages and quotes come from the clean {damage.serving_role} extraction "
            f"({damage.extractor})."
        )


@dataclass(frozen=True)
class TextDamage:
    serving_damaged: bool  # True: no clean extraction serves; False: a clean one replaced it
    share: float  # of the words glued, in the damaged extraction
    serving_role: str
    extractor: str  # the serving extraction's


class ExtractionRole(models.TextChoices):
    PRIMARY = "primary"
    SECONDARY = "secondary"


class ExtractionStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    ADMITTED = "admitted"
    FAILED = "failed"
    ERASED = "erased"  # its text was erased for good (knowledge.erasure)


class Extraction(models.Model):
    """Text of a revision by one extractor library.

    Passages are cut from the one admitted extraction that `serves_passages`: the primary,
    unless it is damaged (see knowledge.extraction.damage) and the secondary is clean. The
    other admitted extraction is the second reading every quote is checked against.
    """

    revision = models.ForeignKey(
        DocumentRevision, on_delete=models.PROTECT, related_name="extractions"
    )
    role = models.CharField(max_length=16, choices=ExtractionRole.choices)
    extractor = models.CharField(max_length=64, blank=True)
    extractor_version = models.CharField(max_length=32, blank=True)
    text = models.TextField(blank=True)
    text_sha256 = models.CharField(max_length=64, blank=True)
    # Normalised words of `text` (see knowledge.normalise), for the one-statement quote check.
    norm_text = models.TextField(blank=True)
    status = models.CharField(
        max_length=16, choices=ExtractionStatus.choices, default=ExtractionStatus.PENDING
    )
    error_code = models.CharField(max_length=32, blank=True)
    # Share of the text's words (by letters) that look glued, measured on admission;
    # None for rows admitted before it was measured.
    damage = models.FloatField(null=True, blank=True)
    # Set on admission (knowledge.documents.extraction.revision_extract) and never moved afterwards.
    serves_passages = models.BooleanField(default=False)
    progress = models.PositiveSmallIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # Last time the extraction was handed to the broker; the sweeper re-queues
    # pending rows whose message was lost (knowledge.documents.extraction.extractions_recover).
    queued_at = models.DateTimeField(null=True, blank=True)
    # Last sign of life of the worker running it; stale means that worker died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["revision_id", "role"]
        indexes = [
            models.Index(
                fields=["status", "heartbeat_at"],
                condition=models.Q(status__in=["pending", "running"]),
                name="extraction_unfinished_idx",
            )
        ]
        constraints = [
            models.UniqueConstraint(fields=["revision", "role"], name="extraction_role_unique"),
            models.UniqueConstraint(
                fields=["revision"],
                condition=models.Q(serves_passages=True),
                name="extraction_one_serving_per_revision",
            ),
            models.CheckConstraint(
                condition=models.Q(serves_passages=False) | models.Q(status="admitted"),
                name="extraction_serving_is_admitted",
            ),
            models.CheckConstraint(
                condition=models.Q(damage__isnull=True) | models.Q(damage__gte=0, damage__lte=1),
                name="extraction_damage_is_a_share",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.revision} {self.role} ({self.status})"

    @property
    def error_message(self) -> str:
        """What `error_code` means, in a sentence fit for the person who uploaded the file."""

        return error_message(self.error_code)

    @property
    def is_damaged(self) -> bool:
        """Whether `damage` is past KOINON_EXTRACTION_DAMAGE_THRESHOLD (never when unmeasured)."""
        return extraction_is_damaged(
            self.damage, threshold=settings.KOINON_EXTRACTION_DAMAGE_THRESHOLD
        )

    @property
    def damage_summary(self) -> str:
        """The damage figure as curators read it: "45% of words glued (damaged)"."""
        if self.damage is None:
            return "not measured"
        return f"{self.damage:.0%} of words glued" + (" (damaged)" if self.is_damaged else "")


class EmbeddingStatus(models.TextChoices):
    PENDING = "pending"
    EMBEDDED = "embedded"
    UNAVAILABLE = "embedding_unavailable"


class Passage(models.Model):
    """A slice of an admitted extraction: text == extraction.text[char_start:char_end]."""

    extraction = models.ForeignKey(Extraction, on_delete=models.PROTECT, related_name="passages")
    # Denormalised from the extraction so that the permission filter runs inside one query.
    revision = models.ForeignKey(
        DocumentRevision, on_delete=models.PROTECT, related_name="passages"
    )
    document = models.ForeignKey(Document, on_delete=models.PROTECT, related_name="passages")
    space = models.ForeignKey(Space, on_delete=models.PROTECT, null=True, related_name="+")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+"
    )
    # True exactly for passages of the document's current revision (see document_set_current).
    is_current = models.BooleanField(default=False)
    ordinal = models.PositiveIntegerField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    text = models.TextField()
    locator = models.JSONField(default=dict, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSION, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    embedding_dimension = models.PositiveSmallIntegerField(null=True, blank=True)
    embedding_status = models.CharField(
        max_length=32, choices=EmbeddingStatus.choices, default=EmbeddingStatus.PENDING
    )
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["extraction_id", "ordinal"]
        constraints = [
            models.UniqueConstraint(
                fields=["extraction", "ordinal"], name="passage_ordinal_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(char_end__gt=models.F("char_start")), name="passage_not_empty"
            ),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="passage_search_gin"),
            HnswIndex(
                name="passage_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["space", "document"], name="passage_scope_idx"),
            models.Index(
                fields=["space"], condition=models.Q(is_current=True), name="passage_current_idx"
            ),
            # Finds vectors of another model without a scan (one value almost everywhere:
            # btree deduplication keeps it small).
            models.Index(
                fields=["embedding_model"],
                condition=models.Q(embedding_status=EmbeddingStatus.EMBEDDED),
                name="passage_embedding_model_idx",
            ),
            # Passages still waiting for a vector: few or none, read by health and the sweeper.
            models.Index(
                fields=["extraction", "embedding_status"],
                condition=~models.Q(embedding_status=EmbeddingStatus.EMBEDDED),
                name="passage_waiting_vector_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.revision} #{self.ordinal}"


class Erasure(models.Model):
    """The erasure log: one row per revision whose text was erased for good, by whom and
    why, and how many stored copies were replaced by the tombstone. PostgreSQL keeps it
    append-only, and only the erasure function writes it (knowledge/migrations/0013;
    docs/erasure.md)."""

    revision = models.OneToOneField(
        DocumentRevision, on_delete=models.PROTECT, related_name="erasure"
    )
    document = models.ForeignKey(Document, on_delete=models.PROTECT, related_name="erasures")
    erased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.CharField(max_length=500)
    erased_at = models.DateTimeField()
    # Per table, how many rows had a copy replaced; `refused`: strings the function did
    # not take (not in the revision's text, or too short to hunt for).
    counts = models.JSONField(default=dict)

    class Meta:
        ordering = ["-erased_at", "-id"]

    def __str__(self) -> str:
        return f"erasure of revision {self.revision_id} ({self.erased_at:%Y-%m-%d})"


class LexemeFrequency(models.Model):
    """How many current passages of a space contain a lexeme (English stemming, as in their
    search vectors): the document frequencies behind the selector's IDF weights, read per
    answer without counting passages. The lexeme "" counts the space's current passages.

    Kept in step with `Passage.is_current` by
    knowledge.documents.extraction.document_set_current, in the same transaction; private
    files (no space) are counted live instead.
    """

    space = models.ForeignKey(Space, on_delete=models.CASCADE, related_name="+")
    lexeme = models.TextField()
    passages = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["space", "lexeme"], name="lexeme_frequency_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.space_id}:{self.lexeme or '(passages)'}={self.passages}"


class KnowledgeEntry(models.Model):
    """A curated topic of a space. Its text lives in immutable numbered versions.

    Each version is also stored as a revision of a backing Document (kind
    "knowledge") so that it is retrieved, cited and verified like any document.
    """

    space = models.ForeignKey(Space, on_delete=models.PROTECT, related_name="knowledge_entries")
    title = models.CharField(max_length=300)
    document = models.OneToOneField(
        Document, on_delete=models.PROTECT, related_name="knowledge_entry"
    )
    current_version = models.ForeignKey(
        "KnowledgeVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["title"]
        verbose_name_plural = "knowledge entries"
        constraints = [
            models.UniqueConstraint(fields=["space", "title"], name="knowledge_entry_title_unique")
        ]

    def __str__(self) -> str:
        return self.title


class KnowledgeVersion(models.Model):
    """An approved, immutable text of an entry; created only by approving a proposal."""

    entry = models.ForeignKey(KnowledgeEntry, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    body = models.TextField()
    body_sha256 = models.CharField(max_length=64)
    revision = models.OneToOneField(
        DocumentRevision, on_delete=models.PROTECT, related_name="knowledge_version"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField()

    class Meta:
        ordering = ["entry_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "number"], name="knowledge_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.entry} v{self.number}"


class ProposalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


class ProposalOrigin(models.TextChoices):
    API = "api"
    CONVERSATION = "conversation"
    ADMIN = "admin"


class KnowledgeProposal(models.Model):
    """A proposed new text for an entry (or a new entry). It stays a proposal until a
    curator of the space approves it in admin; no answer or API call can apply it."""

    space = models.ForeignKey(Space, on_delete=models.PROTECT, related_name="knowledge_proposals")
    entry = models.ForeignKey(
        KnowledgeEntry, on_delete=models.PROTECT, null=True, blank=True, related_name="proposals"
    )
    # The version the proposer saw; approval is refused once the entry moved on.
    base_version = models.ForeignKey(
        KnowledgeVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    title = models.CharField(max_length=300)
    body = models.TextField()
    reason = models.TextField(blank=True)
    origin = models.CharField(
        max_length=16, choices=ProposalOrigin.choices, default=ProposalOrigin.API
    )
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(
        max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.PENDING
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    approved_version = models.OneToOneField(
        KnowledgeVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="proposal"
    )
    # A conversation-derived proposal: the exact output capture of its preview (run,
    # generation, release id, text hash). Approval is refused once the run moved on.
    capture = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"
