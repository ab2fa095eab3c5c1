"""Outside channels in admin: superusers configure them (the credential write-only),
curators enable a configured channel for the spaces they curate."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from core.errors import ApiError
from core.types import request_user
from knowledge.admin import CuratedAdmin
from knowledge.selectors import spaces_curated_by
from outside.models import Channel, SpaceChannel
from outside.selectors import channels_enablable, space_channels_curated_by
from outside.services import (
    CREDENTIAL_MAX,
    channel_save,
    space_channel_disable,
    space_channel_enable,
)


class ChannelForm(forms.ModelForm):
    """The credential is typed in, never shown back: empty keeps the stored one."""

    new_credential = forms.CharField(
        label="Credential",
        required=False,
        max_length=CREDENTIAL_MAX,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="An API key or token the service issued. Stored encrypted and never shown "
        "again; leave empty to keep the stored one.",
    )
    remove_credential = forms.BooleanField(label="Remove the stored credential", required=False)

    class Meta:
        model = Channel
        fields = [
            "name",
            "kind",
            "endpoint",
            "transport",
            "options",
            "timeout_seconds",
            "max_results",
            "max_bytes",
            "active",
        ]


class SpaceChannelInline(admin.TabularInline):
    model = SpaceChannel
    extra = 0
    fields = ("space", "enabled_by", "enabled_at")
    readonly_fields = ("space", "enabled_by", "enabled_at")

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ["name", "kind", "endpoint", "active", "credential_stored"]
    list_filter = ["kind", "active"]
    inlines = [SpaceChannelInline]

    @admin.display(boolean=True, description="credential")
    def credential_stored(self, channel: Channel) -> bool:
        return channel.has_credential

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def save_model(
        self, request: HttpRequest, obj: Channel, form: forms.ModelForm, change: bool
    ) -> None:
        typed = form.cleaned_data.get("new_credential") or None
        credential = "" if form.cleaned_data.get("remove_credential") else typed
        channel_save(user=request_user(request), channel=obj, credential=credential)


class SpaceChannelForm(forms.ModelForm):
    class Meta:
        model = SpaceChannel
        fields = ["space", "channel"]


@admin.register(SpaceChannel)
class SpaceChannelAdmin(CuratedAdmin):
    """A curator enables a configured channel for a space they curate; deleting the row
    disables it."""

    form = SpaceChannelForm
    list_display = ["channel", "space", "enabled_by", "enabled_at"]

    def curated(self, request: HttpRequest) -> QuerySet:
        return space_channels_curated_by(user=request.user)

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_view_permission(request, obj)

    def get_form(
        self,
        request: HttpRequest,
        obj: SpaceChannel | None = None,
        change: bool = False,
        **kwargs: object,
    ) -> type[forms.ModelForm]:
        form = super().get_form(request, obj, change, **kwargs)
        # Only the spaces this curator curates, only the active channels.
        form.base_fields["space"].queryset = spaces_curated_by(user=request.user)  # type: ignore[attr-defined]
        form.base_fields["channel"].queryset = channels_enablable()  # type: ignore[attr-defined]
        return form

    def delete_model(self, request: HttpRequest, obj: SpaceChannel) -> None:
        space_channel_disable(user=request_user(request), space=obj.space, channel=obj.channel)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[SpaceChannel]) -> None:
        for link in queryset.select_related("space", "channel"):
            self.delete_model(request, link)

    def save_model(
        self, request: HttpRequest, obj: SpaceChannel, form: forms.ModelForm, change: bool
    ) -> None:
        try:
            link = space_channel_enable(
                user=request_user(request), space=obj.space, channel=obj.channel
            )
        except ApiError as error:
            self.message_user(request, str(error.detail), messages.ERROR)
            return
        obj.pk = link.pk
