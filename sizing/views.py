"""The "Will it fit?" page: the form, and for every catalog GPU the smallest fitting
configuration with its memory drawn against what the device reports."""

from django.shortcuts import render
from django.utils.translation import gettext_lazy as _

from sizing.api import sizing_answer
from sizing.diffusion_services import DIFFUSION_CAVEATS
from sizing.forms import DIFFUSION_FIELDS, TRAINING_FIELDS, SizingForm
from sizing.services import CAVEATS, prices_now, rental_price, smallest_fits

GIB = 2**30
PARALLELISM = {
    "single": _("one GPU"), "tp": _("tensor parallel (TP)"), "ddp": "DDP", "fsdp": "FSDP",
    "zero2": "ZeRO-2", "zero3": "ZeRO-3", "balanced": _("whole components per GPU"),
}  # fmt: skip
# (figure, CSS class, the words the legend uses)
PARTS = [
    ("weights_bytes", "weights", _("weights")),
    ("kv_cache_bytes", "kv", _("KV cache")),
    ("gradients_bytes", "gradients", _("gradients")),
    ("optimizer_bytes", "optimizer", _("optimizer state")),
    ("activations_bytes", "activations", _("activations")),
    ("overhead_bytes", "overhead", _("overhead")),
]


def _bar(candidate: dict) -> list[dict]:
    """Stacked segments as shares of the usable memory (the bar's full width)."""
    usable = candidate["usable_bytes_per_gpu"] or 1
    scale = max(usable, candidate["per_gpu"]["total_bytes"])
    return [
        {"part": css, "label": label, "gib": candidate["per_gpu"][key] / GIB,
         "pct": candidate["per_gpu"][key] / scale * 100}
        for key, css, label in PARTS
        if candidate["per_gpu"][key]
    ]  # fmt: skip


def sizing_page(request):
    form = SizingForm(request.GET or None)
    answer, rows, facts = None, [], {}
    if form.is_valid():
        answer = sizing_answer(form.cleaned_data["request"])
        if answer.get("workload") == "diffusion":
            facts = {"diffusion": True, "phases": [
                {**p, "total_gib": p["total_bytes"] / GIB, "resident_gib": p["resident_bytes"] / GIB,
                 "activations_gib": p["activations_bytes"] / GIB,
                 "peak": p["phase"] == answer["peak"]["phase"]}
                for p in answer["phases"]
            ]}  # fmt: skip
        else:
            facts = {
                "weights_gib": answer["weights_bytes"] / GIB,
                "kv_kib": (answer["kv_cache_bytes_per_token"] or 0) / 1024,
            }
        prices = prices_now()
        for candidate in smallest_fits(answer["candidates"]):
            total = max(candidate["usable_bytes_per_gpu"], candidate["per_gpu"]["total_bytes"])
            rows.append(
                {**candidate, "bar": _bar(candidate),
                 "parallelism_label": PARALLELISM[candidate["parallelism"]],
                 "caveat_titles": [(c, {**CAVEATS, **DIFFUSION_CAVEATS}[c][0])
                                   for c in candidate["caveats"]],
                 "usable_pct": candidate["usable_bytes_per_gpu"] / total * 100,
                 "total_gib": candidate["per_gpu"]["total_bytes"] / GIB,
                 "usable_gib": candidate["usable_bytes_per_gpu"] / GIB,
                 "headroom_gib": candidate["headroom_bytes"] / GIB,
                 "price": rental_price(candidate["gpu_model"], candidate["gpu_count"],
                                       prices=prices) if candidate["fits"] else None}
            )  # fmt: skip
    return render(
        request,
        "sizing/sizing.html",
        {"form": form, "answer": answer, "rows": rows, "caveats": _caveats_shown(answer, rows), "parts": PARTS,
         "nav": "sizing", "training_fields": TRAINING_FIELDS,
         "diffusion_fields": ("pipeline", *(f for f in DIFFUSION_FIELDS if not f.startswith("vae_"))),
         **facts},
    )  # fmt: skip


def _caveats_shown(answer: dict | None, rows: list[dict]) -> list[dict]:
    """The answer's caveats about the model and workload, and those of the configurations
    on the page: not those of the larger ones tried and not shown."""
    if answer is None:
        return []
    per_configuration = {c for candidate in answer["candidates"] for c in candidate["caveats"]}
    shown = {c for row in rows for c in row["caveats"]}
    return [
        c for c in answer["caveats"] if c["code"] in shown or c["code"] not in per_configuration
    ]
