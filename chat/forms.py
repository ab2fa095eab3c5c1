from typing import cast

from django import forms
from django.http import QueryDict
from django.utils.translation import gettext_lazy as _

from answers.pipeline.request import MAX_QUERY_CHARS
from core.types import User
from knowledge.selectors import ROLE_CURATOR, ROLE_READER, private_files_of, spaces_visible_to


class AskForm(forms.Form):
    """A question and the sources to search. Choices are what the user may read: an id
    of anything else is a field error, never a lookup."""

    query = forms.CharField(
        label=_("Your question"),
        max_length=MAX_QUERY_CHARS,
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    spaces = forms.TypedMultipleChoiceField(coerce=int, required=False, label=_("Spaces"))
    # A field named `files` shadows BaseForm.files in the stubs; Django moves declared fields
    # to base_fields, so the form's uploads stay in `self.files`.
    files = forms.TypedMultipleChoiceField(  # type: ignore[assignment]
        coerce=int, required=False, label=_("Private files")
    )
    action = forms.ChoiceField(choices=[("ask", "ask"), ("save", "save")], required=False)
    # Set by the page's script: the run executes in the worker and the page follows it.
    live = forms.BooleanField(required=False)

    def __init__(self, data: QueryDict | None = None, *, user: User) -> None:
        super().__init__(data)
        cast(forms.ChoiceField, self.fields["spaces"]).choices = [
            (pk, str(pk)) for pk in spaces_visible_to(user=user).values_list("pk", flat=True)
        ]
        cast(forms.ChoiceField, self.fields["files"]).choices = [
            (pk, str(pk)) for pk in private_files_of(user=user).values_list("pk", flat=True)
        ]

    def clean(self) -> dict[str, object]:
        data = super().clean()
        if data is None:  # Form.clean returns cleaned_data; None only from an override
            data = self.cleaned_data
        if data.get("action") != "save" and not (data.get("query") or "").strip():
            self.add_error("query", _("Type a question."))
        return data


class RenameForm(forms.Form):
    title = forms.CharField(label=_("Title"), max_length=200)


class UploadForm(forms.Form):
    file = forms.FileField(label=_("Private file"))


class CorrectionForm(forms.Form):
    text = forms.CharField(
        label=_("Correction"),
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("For example: the retention period is in the new policy, not the old one."),
    )
    # Which searches it steers: those of one space, or (empty) only those over every space.
    space = forms.TypedChoiceField(
        coerce=int,
        required=False,
        empty_value=None,
        label=_("For"),
        help_text=_("A correction for one space steers questions asked in that space."),
    )

    def __init__(self, data: QueryDict | None = None, *, user: User) -> None:
        super().__init__(data)
        cast(forms.ChoiceField, self.fields["space"]).choices = [
            ("", _("questions over every space"))
        ] + [(space.pk, space.name) for space in spaces_visible_to(user=user).order_by("name")]


ROLE_CHOICES = [(ROLE_READER, _("reader")), (ROLE_CURATOR, _("curator"))]


class UserCreateForm(forms.Form):
    """A new person; their first password is generated and shown once."""

    username = forms.CharField(label=_("Username"), max_length=150)
    email = forms.EmailField(label=_("Email (optional)"), required=False)
    staff = forms.BooleanField(
        label=_("Staff"),
        required=False,
        help_text=_("May create spaces (and curate them) and open admin."),
    )
    superuser = forms.BooleanField(
        label=_("Superuser"), required=False, help_text=_("Every permission, every space.")
    )


class SpaceCreateForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=200)
    description = forms.CharField(
        label=_("Description (optional)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class MemberForm(forms.Form):
    """A role for a person in a space: reader, or curator (who also reads)."""

    username = forms.CharField(label=_("Username"), max_length=150)
    role = forms.ChoiceField(
        label=_("Role"),
        choices=ROLE_CHOICES,
        initial=ROLE_READER,
    )


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=100,
        help_text=_("Where the key is used, for example “laptop” or “nightly import”."),
    )
