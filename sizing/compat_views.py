"""The "Will it run?" page beside "Will it fit?": a framework build (or a bare CUDA
toolkit) checked against every GPU model and software stack in the catalog, with the
reasons in words, their sources, and one click to book on nodes that meet it."""

from urllib.parse import urlencode

from django import forms
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from core.errors import Invalid, form_errors_add
from sizing.compat_services import compatibility_check
from sizing.compatibility import FEATURES

FEATURE_LABELS = {
    "bf16": "BF16", "fp8": "FP8", "flash-attention-2": "FlashAttention-2",
    "flash-attention-3": "FlashAttention-3",
}  # fmt: skip


class CompatibilityForm(forms.Form):
    framework = forms.ChoiceField(
        label=_("Framework"),
        choices=[("pytorch", "PyTorch"), ("vllm", "vLLM"), ("cuda", _("CUDA toolkit"))],
    )
    version = forms.CharField(label=_("Version"), max_length=40, help_text="2.7, 0.32, 12.6")
    build = forms.CharField(
        label=_("Build"), max_length=40, required=False, help_text="cu128, rocm6.3"
    )
    features = forms.MultipleChoiceField(
        label=_("Features"), required=False, widget=forms.CheckboxSelectMultiple,
        choices=[(f, FEATURE_LABELS[f]) for f in FEATURES],
    )  # fmt: skip


def compatibility_page(request):
    form = CompatibilityForm(request.GET or None)
    answer = None
    if form.is_valid():
        try:
            answer = compatibility_check(**form.cleaned_data)
        except Invalid as exc:
            form_errors_add(form, exc)
    if answer:
        for row in answer["answers"]:
            requires = urlencode(answer["requires"])
            row["book_url"] = f"{reverse('book', args=[row['gpu_model']])}?{requires}"
            row["fit_url"] = f"{reverse('sizing')}?{urlencode({'gpu_model': row['gpu_model']})}"
    return render(
        request, "sizing/compatibility.html",
        {"form": form, "answer": answer, "nav": "compatibility"},
    )  # fmt: skip
