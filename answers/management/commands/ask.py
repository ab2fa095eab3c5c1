import json
from collections.abc import Mapping

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from answers.models import Conversation
from answers.pipeline.lifecycle import answer_create
from answers.pipeline.request import answer_request_parse
from core.errors import ApiError
from knowledge.selectors import space_find


class Command(BaseCommand):
    help = "Ask a question as a user; prints the sealed answer (or --json for the full body)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question")
        parser.add_argument("--user", required=True)
        parser.add_argument("--space", action="append", default=[], help="space name or id")
        parser.add_argument("--mode", default="ask")
        parser.add_argument("--language")
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(
        self,
        *args: object,
        question: str,
        user: str,
        space: list[str],
        mode: str,
        language: str | None,
        as_json: bool,
        **options: object,
    ) -> None:
        asker = get_user_model().objects.filter(username=user, is_active=True).first()
        if asker is None:
            raise CommandError(f"no active user {user!r}")
        space_ids = []
        for name in space:
            match = space_find(name_or_id=name)
            if match is None:
                raise CommandError(f"no space {name!r}")
            space_ids.append(match.pk)
        data = {"query": question, "mode": mode, "space_ids": space_ids}
        if language:
            data["language"] = language
        try:
            body = answer_create(
                user=asker, request=answer_request_parse(data), origin=Conversation.Origin.CLI
            )
        except ApiError as error:
            raise CommandError(f"{error.error_code}: {error.detail}") from None
        if as_json:
            self.stdout.write(_dumps(body))
            return
        self.stdout.write(body["answer"]["text"])
        evidence = body["evidence"]
        self.stdout.write(
            f"\n[{evidence['answer_status']}; evidence {evidence['status']}; run {body['run_id']}]"
        )


def _dumps(body: Mapping[str, object]) -> str:
    return json.dumps(body, indent=2, ensure_ascii=False, default=str)
