"""The account's webhooks page: register endpoints (the secret is shown once), enable or
disable them, send a test event, read each endpoint's recent deliveries."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.roles import acting_for_request
from core.errors import DomainError, Invalid, form_errors_add
from webhooks import selectors, services
from webhooks.models import EventType

LOG_ROWS = 10


class EndpointForm(forms.Form):
    url = forms.URLField(
        label=gettext_lazy("Receiver URL"),
        max_length=500,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"style": "width:100%", "placeholder": "https://"}),
    )
    events = forms.MultipleChoiceField(
        label=gettext_lazy("Events"),
        choices=EventType.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=list(EventType.values),
    )
    description = forms.CharField(label=gettext_lazy("Note"), max_length=200, required=False)


ACTIONS = {"disable", "enable", "test", "delete"}
NEW_SECRET_SESSION_KEY = "new_webhook_secret"


@login_required
def webhooks_page(request):
    acting = acting_for_request(request)
    form, new_secret, status = EndpointForm(), None, 200
    if request.method == "POST" and request.POST.get("action") in ACTIONS:
        return _act(request, acting)
    if request.method == "POST":
        form = EndpointForm(request.POST)
        if form.is_valid():
            try:
                _endpoint, new_secret = services.endpoint_create(acting=acting, **form.cleaned_data)
            except Invalid as exc:
                form_errors_add(form, exc)
            except DomainError as exc:
                form.add_error(None, exc.detail)
            else:
                # Post/redirect/get: the secret is kept for the next view of the page only.
                request.session[NEW_SECRET_SESSION_KEY] = new_secret
                return redirect("webhooks")
        status = 400 if form.errors else 200
    else:
        new_secret = request.session.pop(NEW_SECRET_SESSION_KEY, None)
    endpoints = [
        (endpoint, list(selectors.delivery_log(endpoint=endpoint)[:LOG_ROWS]))
        for endpoint in selectors.endpoint_list(acting=acting)
    ]
    return render(
        request,
        "webhooks/endpoints.html",
        {"form": form, "endpoints": endpoints, "new_secret": new_secret,
         "event_types": EventType.choices, "nav": "webhooks"},
        status=status,
    )  # fmt: skip


def _act(request, acting):
    endpoint = selectors.endpoint_get(acting=acting, pk=request.POST.get("endpoint"))
    if endpoint is None:
        messages.error(request, _("No such endpoint."))
        return redirect("webhooks")
    action = request.POST["action"]
    try:
        if action == "test":
            services.endpoint_test(acting=acting, endpoint=endpoint)
            messages.success(request, _("A test event is on its way; its delivery shows below."))
        elif action == "delete":
            services.endpoint_delete(acting=acting, endpoint=endpoint)
            messages.success(request, _("Endpoint removed."))
        else:
            services.endpoint_update(acting=acting, endpoint=endpoint, is_active=action == "enable")
            messages.success(
                request, _("Endpoint enabled.") if action == "enable" else _("Endpoint disabled.")
            )
    except DomainError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("webhooks")
