import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Conversation(models.Model):
    class Origin(models.TextChoices):
        """Where the conversation was started: the chat lists its own by default."""

        CHAT = "chat", _("chat")
        API = "api", _("API")
        CLIENT = "client", _("client")  # one of koinon's clients, over the API
        MCP = "mcp", _("MCP")
        CLI = "cli", _("command line")
        MEASURE = "measure", _("question set")  # a curator's question set (answers.question_sets)

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    title = models.CharField(max_length=200, blank=True)
    language = models.CharField(max_length=8, blank=True)
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.API)
    # Deleted by its owner: gone from every list and lookup (its runs, releases and audits
    # stay, as sealed records must; the owner still reads a run's receipt by its id).
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.title or f"conversation {self.pk}"


class AnswerRun(models.Model):
    """One question asked: its policy, plan, candidates, generations and final body."""

    class Status(models.TextChoices):
        RUNNING = "running"
        PUBLISHED = "published"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The key the question came with; revoking it before publication aborts the answer.
    api_key = models.ForeignKey(
        "core.ApiKey", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="runs")
    question = models.TextField()
    mode = models.CharField(max_length=16)
    policy = models.JSONField()
    explicit_policy = models.BooleanField(default=False)
    language = models.CharField(max_length=8)
    space_ids = models.JSONField(default=list)
    selected_sources = models.JSONField(default=list)
    # Pages the asker chose for `fetch_url` (issue 50).
    urls = models.JSONField(default=list, blank=True)
    plan = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    # Raised by every genuine retry; a refusal without a model call is unique per context.
    reset_context = models.PositiveIntegerField(default=0)
    response = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"run {self.pk}"


class Generation(models.Model):
    run = models.ForeignKey(AnswerRun, on_delete=models.PROTECT, related_name="generations")
    number = models.PositiveIntegerField()
    provider = models.CharField(max_length=32)

    class Status(models.TextChoices):
        RUNNING = "running"  # stored, waiting for an execution to claim it
        EXECUTING = "executing"  # claimed by one execution (generation_claim)
        PUBLISHED = "published"
        FAILED = "failed"

    model_id = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # Recovery of lost work (answers.recovery): how often its task was queued, and who
    # took it when (the worker's hostname; "" when executed in the web process).
    dispatches = models.PositiveSmallIntegerField(default=1)
    queued_at = models.DateTimeField(default=timezone.now)
    worker = models.CharField(max_length=200, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="generation_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.run} g{self.number}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.PROTECT, related_name="messages"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    text = models.TextField()
    run = models.ForeignKey(
        AnswerRun, on_delete=models.PROTECT, null=True, blank=True, related_name="messages"
    )
    generation = models.ForeignKey(
        Generation, on_delete=models.PROTECT, null=True, blank=True, related_name="messages"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation_id", "id"]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk}"  # never its text (admin shows this)


class CandidateFact(models.Model):
    """Evidence recorded before selection; the model may only point at these."""

    class Kind(models.TextChoices):
        QUOTE = "quote"
        VALUE = "value"

    run = models.ForeignKey(AnswerRun, on_delete=models.PROTECT, related_name="candidates")
    fact_id = models.CharField(max_length=32)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # quote: document/revision/extraction/passage and offsets; value: query/snapshot/cell.
    source = models.JSONField()
    text = models.TextField(blank=True)
    value = models.JSONField(null=True, blank=True)
    label = models.CharField(max_length=300, blank=True)
    lineage = models.JSONField(default=list)
    contributions = models.JSONField(default=dict)
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "fact_id"], name="candidate_fact_unique")
        ]

    def __str__(self) -> str:
        return f"{self.fact_id} ({self.kind})"


class Citation(models.Model):
    run = models.ForeignKey(AnswerRun, on_delete=models.PROTECT, related_name="citations")
    generation = models.ForeignKey(Generation, on_delete=models.PROTECT, related_name="citations")
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="citations")
    ordinal = models.PositiveSmallIntegerField()
    fact = models.ForeignKey(CandidateFact, on_delete=models.PROTECT, related_name="+")
    data = models.JSONField()

    class Meta:
        ordering = ["message", "ordinal"]

    def __str__(self) -> str:
        return f"citation {self.ordinal} of {self.message_id}"


class Card(models.Model):
    run = models.ForeignKey(AnswerRun, on_delete=models.PROTECT, related_name="cards")
    generation = models.ForeignKey(Generation, on_delete=models.PROTECT, related_name="cards")
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="cards")
    ordinal = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=32)
    data = models.JSONField()

    class Meta:
        ordering = ["message", "ordinal"]

    def __str__(self) -> str:
        return f"{self.kind} card {self.ordinal} of {self.message_id}"


class ConversationSource(models.Model):
    """One source in a conversation's current explicit selection: a space to search, or
    one of the owner's private files. The recheck before sealing reads these rows, so
    deselecting a private file withdraws it from answers not yet sealed."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="sources")
    space = models.ForeignKey(
        "knowledge.Space", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    document = models.ForeignKey(
        "knowledge.Document", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(space__isnull=False, document__isnull=True)
                | models.Q(space__isnull=True, document__isnull=False),
                name="conversation_source_one_kind",
            ),
            models.UniqueConstraint(
                fields=["conversation", "space"], name="conversation_source_space_unique"
            ),
            models.UniqueConstraint(
                fields=["conversation", "document"], name="conversation_source_document_unique"
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.conversation_id}: space {self.space_id or '-'} file {self.document_id or '-'}"
        )


class QuestionSet(models.Model):
    """A space's own questions, each with the text that answers it or none (not
    answerable), given by a curator to measure answering in that space (issue 47, item 6).
    Read and changed only through answers.question_sets, by the space's curators."""

    space = models.ForeignKey("knowledge.Space", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class SetQuestion(models.Model):
    """One question of a set; `expected` is a substring a supporting quote holds, or empty
    for a question the space's documents do not answer."""

    question_set = models.ForeignKey(
        QuestionSet, on_delete=models.CASCADE, related_name="questions"
    )
    position = models.PositiveIntegerField()
    text = models.TextField()
    expected = models.TextField(blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(
                fields=["question_set", "position"], name="set_question_position"
            ),
            models.UniqueConstraint(fields=["question_set", "text"], name="set_question_once"),
        ]

    def __str__(self) -> str:
        return f"question {self.position} of set {self.question_set_id}"

    @property
    def answerable(self) -> bool:
        return bool(self.expected)


class QuestionSetRun(models.Model):
    """One run of a set through the answer pipeline (a Celery task), under one policy."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")

    question_set = models.ForeignKey(QuestionSet, on_delete=models.CASCADE, related_name="runs")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    policy_mode = models.CharField(max_length=16)  # auto or strict
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # The policy's floor and the threshold the answers were judged at (floor or the
    # space's point then): the curve is known from this point up.
    floor = models.FloatField(null=True, blank=True)
    operating_point = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run {self.pk} of set {self.question_set_id}"


class SetQuestionResult(models.Model):
    """What one question got in one run: the outcome, the released quotes with the judge's
    score of each (from the run's audit), and the best of them (the curve's input)."""

    class Outcome(models.TextChoices):
        SUPPORTED = "supported", _("supported")
        WRONG = "wrong", _("wrong")
        ABSTAINED = "abstained", _("abstained")
        FAILED = "failed", _("failed")  # the run itself failed: counted apart

    run = models.ForeignKey(QuestionSetRun, on_delete=models.CASCADE, related_name="results")
    question = models.ForeignKey(SetQuestion, on_delete=models.CASCADE, related_name="+")
    answer_run = models.ForeignKey(
        AnswerRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    quotes = models.JSONField(default=list)  # [{"quote", "score"}] as released
    best_score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["question__position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "question"], name="set_result_once"),
        ]

    def __str__(self) -> str:
        return f"{self.outcome} for question {self.question_id}"
