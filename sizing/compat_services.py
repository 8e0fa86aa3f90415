""" "Will it run?" against the catalog: the request checked against the reference tables,
then every GPU model and software stack the fleet runs judged by sizing.compatibility, the
reasons in the reader's language, each with its sources and the date they were read."""

from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _

from catalog.selectors import stacks_by_model
from catalog.software import version_error, version_key
from core.errors import Invalid
from glossary.content import disclaimer
from sizing import compatibility, reference
from sizing.models import CudaToolkit, Framework, FrameworkBuild, Origin, RocmRelease

FRAMEWORKS = {"pytorch": "PyTorch", "vllm": "vLLM", "cuda": gettext_lazy("CUDA toolkit")}
# GPU names that are not data-center parts: forward compatibility does not reach them (N3)
_NOT_DATA_CENTER = ("GeForce", "RTX 30", "RTX 40", "RTX 50")

WORDS = {
    "vendor_mismatch": gettext_lazy("A %(stack)s build does not run on %(gpu)s."),
    "arch_sass": gettext_lazy(
        "The build carries kernels (SASS) for compute capability %(sm)s, which run on this "
        "GPU's %(cc)s (same major version, equal or newer minor)."
    ),
    "arch_ptx": gettext_lazy(
        "No kernels for compute capability %(cc)s, but PTX for %(ptx)s, which the driver "
        "compiles for this GPU when the program starts (JIT)."
    ),
    "arch_missing": gettext_lazy(
        "The build carries no kernels for compute capability %(cc)s (it has %(archs)s) and "
        "no PTX this GPU could compile."
    ),
    "arch_floor": gettext_lazy(
        "Its documentation asks for compute capability %(min)s or higher; this GPU has %(cc)s."
    ),
    "arch_below_floor": gettext_lazy(
        "Its documentation asks for compute capability %(min)s or higher; this GPU has only %(cc)s."
    ),
    "arch_blackwell_toolkit": gettext_lazy(
        "Blackwell GPUs (compute capability %(cc)s) need a build made with CUDA %(min)s or "
        "newer; this one is CUDA %(toolkit)s."
    ),
    "arch_cuda13_dropped": gettext_lazy(
        "CUDA %(toolkit)s can no longer compile for compute capability %(cc)s (Maxwell, "
        "Pascal and Volta were removed in CUDA 13.0)."
    ),
    "arch_toolkit": gettext_lazy("CUDA %(toolkit)s can compile for compute capability %(cc)s."),
    "toolkit_unknown": gettext_lazy(
        "The reference table has no driver minimum for CUDA %(toolkit)s."
    ),
    "stack_unknown": gettext_lazy(
        "This node's driver, CUDA and ROCm versions are unknown: no agent has reported them."
    ),
    "driver_meets": gettext_lazy(
        "Driver %(driver)s is at least %(min)s, the driver CUDA %(toolkit)s needs."
    ),
    "cuda_meets": gettext_lazy(
        "The driver supports CUDA up to %(cuda)s, at least the build's CUDA %(toolkit)s."
    ),
    "minor_compat": gettext_lazy(
        "Driver below %(min)s (CUDA %(toolkit)s's own), but at least %(floor)s, the floor "
        "of CUDA %(major)s.x: it runs under minor-version compatibility, with a limited "
        "feature set (calls that need a newer driver fail)."
    ),
    "minor_compat_no_ptx": gettext_lazy(
        "The driver is below %(min)s (CUDA %(toolkit)s's own). Minor-version compatibility "
        "would let the build run, but not code compiled from PTX on an older driver, and "
        "this GPU needs that."
    ),
    "forward_compat": gettext_lazy(
        "The driver is older than CUDA %(major)s.x's floor (%(floor)s): the build needs a "
        "newer driver, or the forward-compatibility package %(package)s (data-center "
        "GPUs only), which the node does not report."
    ),
    "forward_compat_not_this_gpu": gettext_lazy(
        "The driver is older than CUDA %(major)s.x's floor (%(floor)s), and the "
        "forward-compatibility package does not work on this GPU (data-center GPUs only)."
    ),
    "bf16": gettext_lazy("BF16 needs compute capability %(min)s or higher; this GPU has %(cc)s."),
    "fp8": gettext_lazy("FP8 needs compute capability %(min)s or higher; this GPU has %(cc)s."),
    "fa_toolkit": gettext_lazy(
        "%(feature)s needs CUDA %(min)s or newer; the build is %(toolkit)s."
    ),
    "fa2": gettext_lazy(
        "FlashAttention-2 supports Ampere, Ada and Hopper GPUs (compute capability %(cc)s)."
    ),
    "fa2_blackwell": gettext_lazy(
        "FlashAttention-2's documentation does not list Blackwell (compute capability "
        "%(cc)s): not confirmed either way."
    ),
    "fa2_older": gettext_lazy(
        "FlashAttention-2 supports Ampere, Ada and Hopper only; compute capability %(cc)s "
        "is older (Turing has a separate project)."
    ),
    "fa3": gettext_lazy(
        "FlashAttention-3 is for Hopper (compute capability 9.0); this GPU has %(cc)s."
    ),
    "feature_unchecked": gettext_lazy("%(feature)s is not checked here: no source was read."),
    "feature_catalog": gettext_lazy("%(feature)s on %(gpu)s as the catalog lists it."),
    "gfx950_needs_7": gettext_lazy(
        "%(gfx)s (MI350 series) needs ROCm 7.0 or newer; this is ROCm %(rocm)s."
    ),
    "rocm_floor_gpu": gettext_lazy(
        "Its documentation names ROCm %(rocm)s or newer for Instinct GPUs (%(gfx)s)."
    ),
    "gfx_release_unread": gettext_lazy(
        "Whether ROCm %(rocm)s supports %(gfx)s is not confirmed: its matrix was not read."
    ),
    "gfx_listed": gettext_lazy("ROCm %(rocm)s's compatibility matrix lists %(gfx)s."),
    "gfx_not_listed": gettext_lazy(
        "ROCm %(rocm)s's matrix as read does not list %(gfx)s: not confirmed."
    ),
    "rocm_floor": gettext_lazy("The node runs ROCm %(rocm)s; the build asks for %(min)s or newer."),
    "rocm_window": gettext_lazy(
        "The node runs ROCm %(rocm)s, within two releases of the build's %(build)s (the "
        "documented kernel and user-space window)."
    ),
    "rocm_outside_window": gettext_lazy(
        "The node runs ROCm %(rocm)s, outside the documented window of two releases around "
        "the build's %(build)s."
    ),
}

NOT_CHECKED = gettext_lazy(
    "What is checked: versions and architectures, from the sources cited. What is not: your "
    "workload's own dependencies (other libraries, custom kernels, the image's CUDA "
    "libraries) and how fast it runs."
)


def _major_minor(version: str) -> str:
    return "{}.{}".format(*(version_key(version) + [0])[:2])


def _sources(keys: Iterable[str], *, read_on: date | None = None) -> list[dict[str, Any]]:
    found = []
    for key in keys:
        if not key:
            continue
        where = reference.SOURCES.get(key, key)
        found.append({"key": key, "where": where,
                      "read_on": read_on or reference.READ_ON})  # fmt: skip
    return found


def _keys(source: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in source.split(",") if part.strip())


def reference_tables() -> compatibility.Reference:
    """The rules' tables as they stand in the database (shipped and staff rows)."""
    return compatibility.Reference(
        toolkits={
            _major_minor(row.version): (row.driver_min, _keys(row.source))
            for row in CudaToolkit.objects.all()
        },
        floors=reference.MINOR_COMPAT_FLOOR,
        rocm={
            _major_minor(row.version): (
                frozenset(t.strip() for t in row.gfx_targets.split(";") if t.strip()),
                _keys(row.source),
            )
            for row in RocmRelease.objects.all()
        },
    )


def compatibility_request_check(
    *, framework: str, version: str, build: str = "", features: Sequence[str] = ()
) -> tuple[compatibility.Build, FrameworkBuild | None]:
    """The build asked about, or Invalid naming what is known."""
    framework = (framework or "").strip().lower()
    version, build = (version or "").strip(), (build or "").strip().lower()
    if framework in reference.NOT_COVERED:
        raise Invalid({"framework": str(_not_covered_words(framework))})
    if framework not in FRAMEWORKS:
        raise Invalid({"framework": _("Unknown framework “%(name)s”; known: %(known)s.")
                       % {"name": framework[:40], "known": ", ".join(FRAMEWORKS)}})  # fmt: skip
    if error := version_error(version):
        raise Invalid({"version": error})
    unknown = [f for f in features if f not in compatibility.FEATURES]
    if unknown:
        raise Invalid({"features": _("Unknown feature “%(name)s”; known: %(known)s.")
                       % {"name": unknown[0][:40],
                          "known": ", ".join(compatibility.FEATURES)}})  # fmt: skip
    if framework == "cuda":
        return _toolkit_build(version), None
    rows = list(FrameworkBuild.objects.filter(framework=framework))
    versions = sorted({r.version for r in rows}, key=version_key)
    same = [r for r in rows if version_key(r.version) == version_key(version)]
    if not same:
        raise Invalid({"version": _("No %(framework)s %(version)s in the reference; "
                                    "known: %(known)s.")
                       % {"framework": FRAMEWORKS[framework], "version": version,
                          "known": ", ".join(versions)}})  # fmt: skip
    row = next((r for r in same if r.build == build), None)
    if row is None:
        raise Invalid({"build": _("%(framework)s %(version)s has no build “%(build)s”; "
                                  "its builds: %(known)s.")
                       % {"framework": FRAMEWORKS[framework], "version": version,
                          "build": build[:40],
                          "known": ", ".join(sorted(r.build for r in same))}})  # fmt: skip
    archs = tuple(a.strip() for a in row.archs.split(";") if a.strip())
    return compatibility.Build(
        framework=framework, version=row.version, build=row.build, stack=row.stack,
        toolkit=row.toolkit, archs=archs, ptx=row.ptx, min_compute=row.min_compute,
        toolkit_is_minimum=row.toolkit_is_minimum, sources=_keys(row.source),
    ), row  # fmt: skip


def _toolkit_build(version: str) -> compatibility.Build:
    known = sorted(CudaToolkit.objects.values_list("version", flat=True), key=version_key)
    if not any(version_key(v) == version_key(version) for v in known):
        raise Invalid({"version": _("No CUDA %(version)s in the reference; known: "
                                    "%(known)s.") % {"version": version,
                                                     "known": ", ".join(known)}})  # fmt: skip
    return compatibility.Build(framework="cuda", version=version, build="", stack="cuda",
                               toolkit=version, sources=("N1",))  # fmt: skip


def _not_covered_words(framework: str) -> str:
    return _("%(name)s is not covered: no source for its builds could be cited, so nothing "
             "is checked for it. Covered: PyTorch, vLLM and bare CUDA toolkits.") % {
        "name": {"jax": "JAX", "tensorflow": "TensorFlow"}[framework]
    }  # fmt: skip


def _requires(build: compatibility.Build) -> dict[str, str]:
    """What a booking from this answer asks of its node."""
    if build.stack == "rocm":
        return {"requires_rocm": build.toolkit}
    return {"requires_cuda": _major_minor(build.toolkit)}


def compatibility_check(
    *, framework: str, version: str, build: str = "", features: Sequence[str] = ()
) -> dict[str, Any]:
    """Per GPU model and software stack in the catalog: whether the build runs, and why."""
    asked, row = compatibility_request_check(
        framework=framework, version=version, build=build, features=features
    )
    ref = reference_tables()
    answers = []
    for stack in stacks_by_model():
        model = stack["gpu_model"]
        if (model.vendor == "amd") != (asked.stack == "rocm"):
            continue  # a CUDA build is not asked of AMD GPUs, nor a ROCm one of NVIDIA's
        gpu = compatibility.Gpu(
            name=model.name, vendor=model.vendor, target=model.compute_target,
            driver=stack["driver"], cuda=stack["cuda"], rocm=stack["rocm"], bf16=model.bf16,
            fp8=model.fp8, data_center=not any(w in model.name for w in _NOT_DATA_CENTER),
        )  # fmt: skip
        verdict = compatibility.check(asked, gpu, ref, features)
        answers.append(
            {
                "gpu_model": model.slug,
                "gpu_model_name": model.name,
                "compute_target": model.compute_target,
                "stack": {
                    "driver": stack["driver"],
                    "cuda": stack["cuda"],
                    "rocm": stack["rocm"],
                },  # fmt: skip
                "gpus": stack["gpus"],
                "regions": stack["regions"],
                "runs": verdict.runs,
                "reasons": [
                    {
                        "rule": r.rule,
                        "ok": r.ok,
                        "text": str(WORDS[r.rule] % r.params),
                        "sources": _sources(r.sources, read_on=_read_on(row)),
                    }
                    for r in verdict.reasons
                ],  # fmt: skip
            }
        )
    return {
        "framework": asked.framework,
        "version": asked.version,
        "build": asked.build,
        "stack": asked.stack,
        "toolkit": asked.toolkit,
        "features": list(features),
        "reference": _reference_row(row),
        "requires": _requires(asked),
        "answers": answers,
        "not_covered": [str(_not_covered_words(f)) for f in sorted(reference.NOT_COVERED)],
        "not_checked": str(NOT_CHECKED),
        "glossary": ["cuda", "rocm"],
        "disclaimer": disclaimer(get_language() or "en"),
    }


def _read_on(row: FrameworkBuild | None) -> date | None:
    return row.read_on if row is not None else None


def _reference_row(row: FrameworkBuild | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"origin": row.origin, "source": row.source, "read_on": row.read_on,
            "staff": row.origin == Origin.STAFF}  # fmt: skip


def framework_choices() -> list[tuple[str, str]]:
    return [(value, label) for value, label in Framework.choices] + [
        ("cuda", str(FRAMEWORKS["cuda"]))
    ]
