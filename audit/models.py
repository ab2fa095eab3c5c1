import uuid

from django.db import models


class OutputRelease(models.Model):
    """The receipt of one published answer or refusal. PostgreSQL keeps it append-only
    (see audit/migrations/0002_answer_release.py and docs/releases.md)."""

    class Kind(models.TextChoices):
        ANSWER = "answer"
        REFUSAL = "refusal"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey("answers.AnswerRun", on_delete=models.PROTECT, related_name="releases")
    message = models.ForeignKey("answers.Message", on_delete=models.PROTECT, related_name="+")
    # Empty for a refusal made without a model call (no evidence, unsupported request).
    generation = models.ForeignKey(
        "answers.Generation", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    reset_context = models.PositiveIntegerField()
    policy_version = models.CharField(max_length=16)
    publication_sequence = models.PositiveBigIntegerField(unique=True)
    selected_fact_ids = models.JSONField()
    source_refs = models.JSONField()
    result_hashes = models.JSONField()
    text_sha256 = models.CharField(max_length=64)
    citations_sha256 = models.CharField(max_length=64)
    cards_sha256 = models.CharField(max_length=64)
    policy_sha256 = models.CharField(max_length=64)
    # What was searched for this output: the question as typed, the standalone question
    # when it was rewritten from the conversation, each search with its part and origin,
    # and the memory entries that steered which parts and why (issue 26).
    searched = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["publication_sequence"]

    def __str__(self) -> str:
        return f"{self.kind} release {self.publication_sequence}"


class StreamEvent(models.Model):
    """A sealed stream event, replayed by the events endpoint; never a draft."""

    run = models.ForeignKey("answers.AnswerRun", on_delete=models.PROTECT, related_name="events")
    generation = models.PositiveIntegerField()
    sequence = models.PositiveIntegerField()
    event = models.CharField(max_length=32)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "generation", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "generation", "sequence"], name="stream_event_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.generation}:{self.sequence} {self.event}"


class AnswerAudit(models.Model):
    """What happened in one generation of a run: its plan, steps, retrieval manifest,
    memories and SQL, written when the generation is published. A record: PostgreSQL
    refuses to change or delete it (only the erasure path writes its tombstones;
    audit/migrations/0007_audit_records.py), so a later generation adds a row."""

    run = models.ForeignKey("answers.AnswerRun", on_delete=models.PROTECT, related_name="audits")
    number = models.PositiveIntegerField()  # the generation's
    plan = models.JSONField(default=dict)
    # {"number", "steps", "retrieval", "sql", "memories", ...}; steps timed after sealing
    # are AuditStep rows, added when read (audit.services.audit_generations).
    generation = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="answer_audit_unique")
        ]

    def __str__(self) -> str:
        return f"audit of {self.run_id}, generation {self.number}"


class AuditStep(models.Model):
    """A step of a generation timed after its sealing (the publication itself), kept
    beside the generation's audit row, which is never updated. A record too."""

    run = models.ForeignKey("answers.AnswerRun", on_delete=models.PROTECT, related_name="+")
    generation = models.PositiveIntegerField()
    step = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "generation", "id"]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.generation} {self.step.get('step', '')}"


PUBLICATION_SEQUENCE = "audit_publication_sequence"


class LogEntry(models.Model):
    """One release in the answer log, at its index (dense, from 0, in the order integrated).
    `entry` is the canonical JSON the leaf hash is taken over (audit.log.log_entry_json):
    the receipt's identifying fields and hashes, never answer text. Append-only like the
    receipts (audit/migrations/0005_answer_log.py)."""

    index = models.PositiveBigIntegerField(unique=True)
    release = models.OneToOneField(
        OutputRelease, on_delete=models.PROTECT, related_name="log_entry"
    )
    entry = models.TextField()
    leaf_hash = models.CharField(max_length=64)
    integrated_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["index"]

    def __str__(self) -> str:
        return f"log entry {self.index}"


class LogCheckpoint(models.Model):
    """A signed checkpoint of the answer log (a C2SP signed note, audit.checkpoint): the
    tree of the first `size` entries has root `root_hash`. Append-only."""

    size = models.PositiveBigIntegerField(unique=True)
    root_hash = models.CharField(max_length=64)
    note = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["size"]
        get_latest_by = "size"

    def __str__(self) -> str:
        return f"checkpoint of {self.size}"


class LogSubtree(models.Model):
    """The hash of a complete, aligned subtree of the answer log's tree: leaves
    [index·2^level, (index+1)·2^level), for every level ≥ 1 (level 0 is LogEntry.leaf_hash).
    Written by integration in the transaction of the entries that complete it, so a tree
    head or proof reads O(log n) of them instead of every leaf (audit.log). Derived, never
    trusted by `manage.py log verify`, which recomputes and compares them. Append-only."""

    level = models.PositiveSmallIntegerField()
    index = models.PositiveBigIntegerField()
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["level", "index"]
        constraints = [
            models.UniqueConstraint(fields=["level", "index"], name="log_subtree_unique")
        ]

    def __str__(self) -> str:
        return f"log subtree {self.level}/{self.index}"
