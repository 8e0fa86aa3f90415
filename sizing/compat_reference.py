"""Loading the shipped compatibility reference (sizing/reference.py) into its tables.

A row staff added or changed (origin `staff`) is theirs: the load never overwrites it, and
reports it as kept. Run by migration 0002 and by `manage.py compatibility_reference_load`
after an upgrade that ships a newer table; idempotent.
"""

from core.errors import validated
from sizing import reference

SHIPPED, STAFF = "shipped", "staff"


def shipped_rows() -> dict[str, list[tuple[dict, dict]]]:
    """Per table, (natural key, the other fields) of each shipped row."""
    common = {"read_on": reference.READ_ON, "origin": SHIPPED}
    builds = [
        ({"framework": "pytorch", "version": v, "build": b},
         {"stack": "cuda", "toolkit": t, "archs": archs, "ptx": ptx, "source": src,
          "min_compute": "", "toolkit_is_minimum": False, "note": "", **common})
        for v, b, t, archs, ptx, src in reference.PYTORCH_CUDA
    ] + [
        ({"framework": "pytorch", "version": v, "build": b},
         {"stack": "rocm", "toolkit": t, "archs": "", "ptx": False, "source": src,
          "min_compute": "", "toolkit_is_minimum": False, "note": "", **common})
        for v, b, t, src in reference.PYTORCH_ROCM
    ] + [
        ({"framework": "vllm", "version": reference.VLLM_VERSION, "build": b},
         {"stack": "cuda", "toolkit": t, "archs": "", "ptx": False, "source": "V1",
          "min_compute": reference.VLLM_MIN_COMPUTE, "toolkit_is_minimum": False,
          "note": "", **common})
        for b, t in reference.VLLM_CUDA
    ] + [
        ({"framework": "vllm", "version": reference.VLLM_VERSION, "build": "rocm"},
         {"stack": "rocm", "toolkit": reference.VLLM_ROCM_MIN, "archs": "", "ptx": False,
          "source": "V1", "min_compute": "", "toolkit_is_minimum": True, "note": "",
          **common})
    ]  # fmt: skip
    return {
        "toolkits": [
            ({"version": v}, {"driver_min": d, "source": src, "note": "", **common})
            for v, d, src in reference.CUDA_TOOLKITS
        ],
        "builds": builds,
        "rocm": [
            ({"version": v}, {"gfx_targets": g, "source": src, "note": "", **common})
            for v, g, src in reference.ROCM_TARGETS
        ],
    }


def reference_load(*, toolkits, builds, rocm) -> dict[str, int]:
    """Copy the shipped rows into the tables (the model classes given: a migration passes
    its historical ones). Returns how many were added, updated, and kept as staff's."""
    counts = {"added": 0, "updated": 0, "kept": 0}
    rows = shipped_rows()
    for model, name in ((toolkits, "toolkits"), (builds, "builds"), (rocm, "rocm")):
        for key, fields in rows[name]:
            found = model.objects.filter(**key).first()
            if found is None:
                model.objects.create(**key, **fields)
                counts["added"] += 1
            elif found.origin == STAFF:
                counts["kept"] += 1
            elif any(getattr(found, f) != v for f, v in fields.items()):
                model.objects.filter(pk=found.pk).update(**fields)
                counts["updated"] += 1
    return counts


def reference_row_save_by_staff(row) -> None:
    """A row staff added or changed in the admin: theirs from now on, so a newer shipped
    table never overwrites it (`reference_load` keeps it)."""
    row.origin = STAFF
    validated(row)
    row.save()
