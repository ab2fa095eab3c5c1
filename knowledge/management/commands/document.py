from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ApiError
from core.selectors import user_get_by_username
from knowledge.erasure import revision_erase
from knowledge.lifecycle import WITHDRAW_REASON_MAX, document_restore, document_withdraw
from knowledge.selectors import document_get_for_user, revision_of_document


class Command(BaseCommand):
    help = (
        "Withdraw a document from the current library, restore it, or erase one revision's "
        "text for good, acting as --user: the same role check as the API, admin and the "
        "library pages (curators of its space)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        withdraw = actions.add_parser("withdraw", help="no longer searched or quoted")
        withdraw.add_argument("document", type=int)
        withdraw.add_argument("--user", required=True, help="the curator acting")
        withdraw.add_argument("--reason", default="", help="why (shown to curators)")
        restore = actions.add_parser("restore", help="searched and quoted again")
        restore.add_argument("document", type=int)
        restore.add_argument("--user", required=True, help="the curator acting")
        erase = actions.add_parser("erase", help="erase a revision's text for good")
        erase.add_argument("document", type=int)
        erase.add_argument("--revision", type=int, required=True, help="the revision's id")
        erase.add_argument("--user", required=True, help="the curator acting")
        erase.add_argument("--reason", required=True, help="why (kept in the erasure log)")

    def handle(
        self,
        *args: object,
        action: str,
        document: int,
        user: str,
        reason: str = "",  # withdraw's and erase's (erase requires it)
        revision: int | None = None,  # erase's, required there
        **options: object,
    ) -> None:
        actor = user_get_by_username(username=user)
        if actor is None:
            raise CommandError(f"No active user is named {user!r}.")
        try:
            target = document_get_for_user(user=actor, document_id=document)
            if action == "withdraw":
                if len(reason) > WITHDRAW_REASON_MAX:
                    raise CommandError(f"A reason has at most {WITHDRAW_REASON_MAX} characters.")
                target = document_withdraw(user=actor, document=target, reason=reason)
                self.stdout.write(f"document {target.pk} “{target.title}” withdrawn")
            elif action == "erase":
                erased = revision_of_document(document=target, revision_id=revision)
                erasure = revision_erase(
                    user=actor, document=target, revision=erased, reason=reason
                )
                counts = ", ".join(
                    f"{table} {n}"
                    for table, n in sorted(erasure.counts.items())
                    if n and table not in ("strings", "refused")
                )
                self.stdout.write(
                    f"revision {erased.pk} (r{erased.number}) of document {target.pk}: text "
                    f"erased; copies replaced: {counts or 'none'}"
                )
            else:
                target = document_restore(user=actor, document=target)
                self.stdout.write(f"document {target.pk} “{target.title}” restored")
        except ApiError as error:
            raise CommandError(f"{error.error_code}: {error.detail}") from None
