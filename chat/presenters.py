"""What the chat templates show, built from sealed bodies and stored rows only.

Nothing here reads a draft: answers come from `sealed_answer_read`, receipts from the
release row and the audit written in the same publication transaction. Document text
stays plain data; the templates auto-escape every value."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from answers.boundary import NOTICE_ISSUES, sealed_answer_read, sealed_answers_read
from answers.judge.model import JudgeUnavailable
from answers.models import AnswerRun
from answers.pipeline import texts
from answers.pipeline.judgement import policy_floor
from answers.selectors import (
    audited_generations,
    citation_lines,
    judge_scores,
    run_audit,
    run_release,
)
from audit.log import log_positions, log_verifier_key
from audit.models import StreamEvent
from audit.receipts import body_hashes
from core.types import User
from knowledge.display import single_line
from knowledge.models import Document, ExtractionRole, ExtractionStatus
from knowledge.retrieval import INDEXING
from knowledge.selectors import documents_visible_to

EXTRACTION_ERRORS = {
    "corrupt": gettext_lazy("The file could not be read; it may be damaged."),
    "encrypted": gettext_lazy("The file is password-protected."),
    "no_text": gettext_lazy("The file contains no extractable text."),
    "too_large": gettext_lazy("The file is too large to process."),
    "unsupported_type": gettext_lazy(
        "This file type is not supported. Supported: PDF (.pdf), Word (.docx), HTML (.html, "
        ".htm, .xhtml), Markdown (.md, .markdown), plain text (.txt, .text), WebVTT (.vtt) and "
        "SubRip (.srt)."
    ),
    "timeout": gettext_lazy("Reading the file took too long."),
}

NOT_SEALED = object()  # a generation with no sealed body (run_views knows it has none)

HASH_NOTES = {
    "text_sha256": gettext_lazy("SHA-256 of the UTF-8 bytes of answer.text, exactly as returned."),
    "citations_sha256": gettext_lazy("SHA-256 of canonical(answer.citations)."),
    "cards_sha256": gettext_lazy("SHA-256 of canonical(answer.cards)."),
    "policy_sha256": gettext_lazy("SHA-256 of canonical(evidence.policy)."),
}


# The run's activity in words for people (the stream's tool and step names are codes).
TOOL_LABELS = {
    "vector_search": gettext_lazy("Searching by meaning"),
    "keyword_search": gettext_lazy("Searching by words"),
    "dataset_query": gettext_lazy("Checking datasets"),
    "recheck": gettext_lazy("Checking your access again"),
}
STEP_LABELS = {
    "model": gettext_lazy("Waiting for the model"),  # only a provider with a model
    "plan": gettext_lazy("Planning the searches"),
    "select": gettext_lazy("Choosing the quotes"),
    "verify": gettext_lazy("Checking quotes against the source"),
    "judge": gettext_lazy("Judging whether the quotes answer"),
}
STATE_LABELS = {
    "running": gettext_lazy("running"),
    "succeeded": gettext_lazy("done"),
    "failed": gettext_lazy("failed"),
    "skipped": gettext_lazy("skipped"),
}


def activity_labels() -> dict:
    """What the page's script needs to name live events as the server does."""
    return {
        "tools": {name: str(label) for name, label in TOOL_LABELS.items()},
        "steps": {name: str(label) for name, label in STEP_LABELS.items()},
        "states": {name: str(label) for name, label in STATE_LABELS.items()},
        "found": _("%(count)s found"),
    }


def activity_row(name: str, data: dict) -> dict:
    """One stored (or live) `tool` or `step` event as the activity list shows it."""
    if name == "step":
        step = data.get("step", "")
        return {
            "kind": "step",
            "key": step,
            "state": "succeeded",
            "text": str(STEP_LABELS.get(step, step)),
        }
    tool, state = data.get("tool", ""), data.get("state", "")
    parts = [str(TOOL_LABELS.get(tool, tool)), str(STATE_LABELS.get(state, state))]
    if state == "succeeded":
        parts.append(_("%(count)s found") % {"count": data.get("result_count", 0)})
    return {"kind": "tool", "key": tool, "state": state, "text": " · ".join(parts)}


def runs_activity(runs: list[AnswerRun]) -> dict[tuple[object, int], list[dict]]:
    """(run id, generation) → its activity read back from the stored stream events, for
    every run at once (one query). The events carry no answer content: tool, state, code,
    count, and the steps the run went through, each named once: a step entered again (the
    model planning and then selecting, a second selection attempt) moves to where it was
    last entered, as the live list does."""
    activity: dict[tuple[object, int], list[dict]] = {}
    events = StreamEvent.objects.filter(run__in=runs, event__in=("tool", "step")).order_by(
        "run_id", "generation", "sequence"
    )
    for run_id, generation, name, data in events.values_list(
        "run_id", "generation", "event", "data"
    ):
        rows = activity.setdefault((run_id, generation), [])
        row = activity_row(name, data)
        if row["kind"] == "step":
            rows[:] = [r for r in rows if not (r["kind"] == "step" and r["key"] == row["key"])]
        rows.append(row)
    return activity


def locator_text(locator: dict) -> str:
    if "page" in locator:
        return _("page %(page)s") % {"page": locator["page"]}
    if "start" in locator:
        return f"{locator['start']}–{locator.get('end', '')}"
    if locator.get("headings"):
        return " › ".join(str(heading) for heading in locator["headings"])
    return ""


def lines_text(lines: tuple[int, int]) -> str:
    first, last = lines
    if first == last:
        return _("line %(line)s") % {"line": first}
    return _("lines %(first)s–%(last)s") % {"first": first, "last": last}


def citation_where(citation: dict, lines: tuple[int, int] | None) -> str:
    """Where a quote stands: its locator (page, cue times, headings) and, for plain text
    and Markdown, its line range (`citation_lines`)."""
    parts = (locator_text(citation.get("locator") or {}), lines_text(lines) if lines else "")
    return ", ".join(part for part in parts if part)


Lines = dict[tuple[str, str, str], tuple[int, int]]  # (run id, fact id, quote) → range


def bodies_lines(bodies: Iterable[dict]) -> Lines:
    """The line range of every plain-text or Markdown quote of these sealed bodies, read at
    once."""
    cited = [
        (str(body["run_id"]), c["fact_id"], c["quote"])
        for body in bodies
        for c in body["answer"].get("citations", [])
        if c["kind"] == "quote"
    ]
    return citation_lines(cited=cited)


@dataclass
class AnswerView:
    run_id: str
    generation: int
    status: str  # the body's answer_status, or "unsealed"
    language: str
    introduction: str = ""
    text: str = ""  # the fixed text of an abstention, or the regeneration notice
    quotes: list[dict] = field(default_factory=list)
    values: list[dict] = field(default_factory=list)
    outcomes: list[dict] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    failed_tools: list[str] = field(default_factory=list)
    indexing: bool = False  # semantic search was still waiting for vectors
    released: bool = False
    # Which fixed notice stands in for the sealed answer (a kind of NOTICE_ISSUES: a source
    # withdrawn or erased since, or not accessible), so the badge names it; "" for none.
    notice: str = ""
    searched_as: str = ""  # the question as searched, when rewritten from the conversation
    total: int = 1  # the run's generations: "Answer 2 of 2" once there was a regenerate
    # The support judge's threshold that applied to this answer (`answer_threshold`), said
    # beside the scores: no quote under it is shown. None: unknown (no judge to ask).
    threshold: float | None = None

    @property
    def abstained(self) -> bool:
        return self.status == "abstained"

    @property
    def partial(self) -> bool:
        return self.status == "partial"


def _judged_parts(audit: dict, number: int) -> tuple[int, set[int]]:
    for entry in audit["generations"]:
        if entry["number"] == number:
            judged = [s for s in entry.get("steps", []) if s.get("step") == "judgement"]
            if judged:
                return judged[-1].get("parts", 0), set(judged[-1].get("answered", []))
    return 0, set()


def answer_threshold(body: dict) -> float | None:
    """The support judge's threshold that applied to a sealed answer: sealed in its policy
    (`operating_point`) since thresholds depend on the policy and the spaces. An answer
    sealed before that was judged at the one global threshold, the auto floor (the pinned
    auto point, or the operator's higher minimum); None when the judge cannot be read."""
    point = (body["evidence"].get("policy") or {}).get("operating_point")
    if isinstance(point, int | float) and not isinstance(point, bool):
        return float(point)
    try:
        return policy_floor("auto")
    except JudgeUnavailable:
        return None


def _notice_of(body: dict) -> str:
    if body.get("release") is not None:
        return ""
    issues = (body.get("quality") or {}).get("issues") or []
    return next((kind for kind, issue in NOTICE_ISSUES.items() if issue in issues), "")


def answer_view(
    *,
    user: User,
    run: AnswerRun,
    generation: int,
    body: dict | object | None = None,
    current: dict[int, int] | None = None,
    audited: list[dict] | None = None,
    lines: Lines | None = None,
) -> AnswerView:
    """One generation of the run as the user may read it now; never an unsealed draft.

    `body` (from `sealed_answers_read`), `current` (document id → current revision),
    `audited` (the run's audited generations, for the judge's scores) and `lines` (from
    `bodies_lines`) may be given by a caller that read them for many runs at once.
    """
    if body is None:
        body = sealed_answer_read(user=user, run=run, generation=generation)
    if not isinstance(body, dict):  # None, or NOT_SEALED
        return AnswerView(
            run_id=str(run.pk),
            generation=generation,
            status="unsealed",
            language=run.language,
            text=texts.regeneration_notice(run.language),
        )
    answer, evidence = body["answer"], body["evidence"]
    view = AnswerView(
        run_id=str(run.pk),
        generation=generation,
        status=evidence["answer_status"],
        language=answer["language"],
        outcomes=evidence.get("outcomes", []),
        released=body.get("release") is not None,
        searched_as=((body.get("release") or {}).get("searched") or {}).get("searched_as") or "",
        notice=_notice_of(body),
    )
    citations = answer.get("citations", [])
    if not citations:
        view.text = answer["text"]
        return view
    view.introduction = answer["text"].split("\n", 1)[0]
    view.threshold = answer_threshold(body)
    cards = iter(answer.get("cards", []))
    # A revision current when sealed may have been replaced since: the page says so.
    if current is None:
        current = current_revisions(user=user, bodies=[body])
    if audited is None:
        audited = audited_generations([run]).get(run.pk, [])
    scores = judge_scores(audited, generation, citations)
    if lines is None:
        lines = bodies_lines([body])
    for citation in citations:
        if citation["kind"] == "quote":
            superseded = citation.get("availability") == "superseded" or (
                current.get(citation["document_id"]) != citation["revision_id"]
            )
            # Shown in their display form: one line, no bidi controls or invisible
            # characters (the verbatim quote stays in the body and the receipt).
            view.quotes.append(
                {
                    **citation,
                    "superseded": superseded,
                    "quote": single_line(citation["quote"]),
                    "title": single_line(citation.get("title", "")),
                    "where": citation_where(
                        citation, lines.get((str(run.pk), citation["fact_id"], citation["quote"]))
                    ),
                    "score": scores.get(citation["number"]),
                }
            )
        else:
            card: dict[str, object] = next(cards, {})
            view.values.append({**citation, "lineage": card.get("lineage", [])})
    if view.partial:
        audit = run_audit(run=run)
        plan = audit["plan"] or {}
        parts, answered = _judged_parts(audit, generation)
        searches = plan.get("searches", [])
        view.unanswered = [
            searches[i] for i in range(parts) if i not in answered and i < len(searches)
        ]
        # A channel still catching up (vectors being written) is said as such, not as a
        # source that could not be searched.
        view.indexing = any(o.get("code") == INDEXING for o in view.outcomes)
        view.failed_tools = sorted(
            {
                o["tool"]
                for o in view.outcomes
                if o.get("state") not in {"succeeded", "skipped"} and o.get("code") != INDEXING
            }
        )
    return view


@dataclass
class RunView:
    run: AnswerRun
    current: AnswerView | None
    earlier: list[AnswerView]
    running: bool
    activity: list[dict] = field(default_factory=list)  # the current generation's


def current_revisions(*, user: User, bodies: list[dict]) -> dict[int, int]:
    """Document id → its current revision, for the documents the bodies quote."""
    documents = {
        c["document_id"]
        for body in bodies
        for c in body["answer"].get("citations", [])
        if c["kind"] == "quote"
    }
    if not documents:
        return {}
    return dict(
        documents_visible_to(user=user)
        .filter(pk__in=documents)
        .values_list("pk", "current_revision_id")
    )


def run_views(*, user: User, runs: list[AnswerRun]) -> list[RunView]:
    """Every run with its current and earlier generations; the same number of queries
    for one run as for many (partial answers read their run's audit)."""
    bodies = sealed_answers_read(user=user, runs=runs)
    current = current_revisions(user=user, bodies=list(bodies.values()))
    activity = runs_activity(runs)
    audited = audited_generations(runs)
    lines = bodies_lines(bodies.values())
    views = []
    for run in runs:
        numbers = sorted((g.number, g.status) for g in run.generations.all())
        if not numbers:
            continue

        def view(number: int, run: AnswerRun = run, total: int = len(numbers)) -> AnswerView:
            body = bodies.get((run.pk, number), NOT_SEALED)
            shown = answer_view(
                user=user,
                run=run,
                generation=number,
                body=body,
                current=current,
                audited=audited.get(run.pk, []),
                lines=lines,
            )
            shown.total = total
            return shown

        top, top_status = numbers[-1]
        running = top_status == "running"
        views.append(
            RunView(
                run=run,
                current=None if running else view(top),
                earlier=[view(number) for number, _ in reversed(numbers[:-1])],
                running=running,
                activity=activity.get((run.pk, top), []),
            )
        )
    return views


def file_state(document: Document) -> dict:
    """A private file's extraction as the picker shows it: extracting, admitted or failed
    with a human message."""
    # The newest revision: a new upload is not current until its extraction is admitted.
    revision = max(document.revisions.all(), key=lambda r: r.number, default=None)
    extractions = list(revision.extractions.all()) if revision is not None else []
    # Passages may come from the secondary (a damaged primary): whichever serves, it is ready.
    if any(e.serves_passages for e in extractions):
        return {"state": "admitted", "message": _("Ready"), "progress": 100}
    primary = next((e for e in extractions if e.role == ExtractionRole.PRIMARY), None)
    if primary is None or primary.status in {ExtractionStatus.PENDING, ExtractionStatus.RUNNING}:
        return {
            "state": "extracting",
            "message": _("Extracting text…"),
            "progress": primary.progress if primary else 0,
        }
    if primary.status == ExtractionStatus.ADMITTED:
        return {"state": "admitted", "message": _("Ready"), "progress": 100}
    if primary.status == ExtractionStatus.ERASED:
        return {"state": "erased", "message": _("Text erased"), "progress": 100}
    message = EXTRACTION_ERRORS.get(primary.error_code, _("The file could not be read."))
    return {"state": "failed", "message": str(message), "progress": 100}


def text_damage_warning(document: Document) -> str:
    """What the library says of the current revision's text when it is damaged, in the
    reader's language ("" when there is nothing to say; DocumentRevision.text_damage).
    Reads the prefetched `revisions__extractions`."""
    revision = next(
        (r for r in document.revisions.all() if r.pk == document.current_revision_id), None
    )
    damage = revision.text_damage if revision is not None else None
    if revision is None or damage is None:
        return ""
    share = f"{damage.share:.0%}"
    if damage.serving_damaged:
        return _(
            "The text of revision %(number)s looks damaged (%(share)s of its words glued) "
            "and no clean reading of the file serves instead: passages and quotes may show "
            "words run together."
        ) % {"number": revision.number, "share": share}
    return _(
        "The first reading of revision %(number)s looks damaged (%(share)s of its words "
        "glued): passages and quotes come from a second, clean reading (%(extractor)s)."
    ) % {"number": revision.number, "share": share, "extractor": damage.extractor}


def receipt_view(*, user: User, run: AnswerRun, generation: int) -> dict | None:
    """The receipt of one sealed generation, or None when the user may read none."""
    body = sealed_answer_read(user=user, run=run, generation=generation)
    if body is None:
        return None
    audit = run_audit(run=run)
    entry: dict[str, object] = next(
        (g for g in audit["generations"] if g["number"] == generation), {}
    )
    release = None
    if body.get("release"):
        release = run_release(run=run, release_id=body["release"]["id"])
    if release is None:  # nothing the user may verify: no sources, steps or SQL either
        return {"run": run, "generation": generation, "body": body, "release": None}
    hashes = []
    if release is not None:
        recomputed = body_hashes(body, policy_version=release.policy_version)
        hashes = [
            {
                "name": name,
                "value": getattr(release, name),
                "note": note,
                "matches": recomputed[name] == getattr(release, name),
            }
            for name, note in HASH_NOTES.items()
        ]
    citations = body["answer"].get("citations", [])
    scores = judge_scores(audit["generations"], generation, citations)
    lines = bodies_lines([body])
    quotes = [
        {
            **c,
            "title": single_line(c.get("title", "")),
            "where": citation_where(c, lines.get((str(run.pk), c["fact_id"], c["quote"]))),
            "score": scores.get(c["number"]),
        }
        for c in citations
        if c["kind"] == "quote"
    ]
    values = [c for c in citations if c["kind"] == "value"]
    # Plain names for the technical lists: a revision or snapshot by what it is, a fact
    # id by its citation number.
    named = {
        ("revision", c["revision_id"]): _("%(title)s, revision %(number)s")
        % {"title": c["title"], "number": c["revision_number"]}
        for c in quotes
    }
    named |= {
        ("snapshot", c["snapshot_id"]): _("dataset %(dataset)s, snapshot %(version)s")
        % {"dataset": c["dataset"], "version": c["snapshot_version"]}
        for c in values
    }
    refs = [
        {**ref, "name": named.get((ref.get("type"), ref.get("id")), "")}
        for ref in release.source_refs
    ]
    numbers = {c["fact_id"]: c["number"] for c in citations}
    facts = [{"id": fact, "number": numbers.get(fact)} for fact in release.selected_fact_ids]
    return {
        "run": run,
        "generation": generation,
        "body": body,
        "release": release,
        "quotes": quotes,
        "values": values,
        "source_refs": refs,
        "facts": facts,
        "datasets": sorted({c["dataset"] for c in values}),
        "hashes": hashes,
        "threshold": answer_threshold(body),
        # The point sealed in the policy (None for answers sealed before it was recorded).
        "operating_point": (body["evidence"].get("policy") or {}).get("operating_point"),
        # Read beside the sealed receipt, never part of it (docs/releases.md).
        "log": log_positions([release.pk]).get(str(release.pk)),
        "log_key": log_verifier_key(),
        "steps": entry.get("steps", []),
        "sql": entry.get("sql", []),
        "memories": audit.get("memories_used", []),
        "outcomes": body["evidence"].get("outcomes", []),
    }
