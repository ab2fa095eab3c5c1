"""Publication: the only place an answer becomes visible. One transaction writes the
assistant message, the run's final body, citations and cards — or nothing."""

from dataclasses import dataclass

from django.db import transaction

from answers.models import AnswerRun, CandidateFact, Card, Citation, Generation, Message


@dataclass
class Publication:
    run: AnswerRun
    generation: Generation
    text: str
    body: dict
    citations: list[dict]
    cards: list[dict]


@transaction.atomic
def answer_publish(publication: Publication) -> Message:
    """Write everything of one generation's answer atomically.

    The release and stream events of the audit join this transaction.
    """
    run, generation = publication.run, publication.generation
    message = Message.objects.create(
        conversation_id=run.conversation_id,
        role=Message.Role.ASSISTANT,
        text=publication.text,
        run=run,
        generation=generation,
    )
    facts = {f.fact_id: f for f in CandidateFact.objects.filter(run=run)}
    Citation.objects.bulk_create(
        Citation(
            run=run,
            generation=generation,
            message=message,
            ordinal=index,
            fact=facts[data["fact_id"]],
            data=data,
        )
        for index, data in enumerate(publication.citations)
    )
    Card.objects.bulk_create(
        Card(
            run=run,
            generation=generation,
            message=message,
            ordinal=index,
            kind=data["kind"],
            data=data,
        )
        for index, data in enumerate(publication.cards)
    )
    generation.status = "published"
    generation.save(update_fields=["status", "attempts"])
    run.response = publication.body
    run.status = AnswerRun.Status.PUBLISHED
    run.save(update_fields=["response", "status"])
    return message
