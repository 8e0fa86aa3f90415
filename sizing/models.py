"""The compatibility reference "Will it run?" reads: CUDA toolkits and the driver each
needs, framework builds and what they carry, ROCm releases and the GPUs they support.

Shipped rows come from sizing/reference.py (each with its source and the date it was read);
staff add rows in the admin for a release that came out since, with their own source. A
staff row is theirs: a newer shipped table never overwrites it (sizing.services).
"""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from catalog.software import validate_version
from core.db import choices_check


class Origin(models.TextChoices):
    SHIPPED = "shipped", _("shipped with AnchorGPU")
    STAFF = "staff", _("added by staff")


class Framework(models.TextChoices):
    PYTORCH = "pytorch", "PyTorch"
    VLLM = "vllm", "vLLM"


class BuildStack(models.TextChoices):
    CUDA = "cuda", "CUDA"
    ROCM = "rocm", "ROCm"


class ReferenceRow(models.Model):
    """Where a row's facts come from, and whose it is."""

    source = models.CharField(
        _("source"), max_length=300,
        help_text="the keys of docs/reference/software-compatibility.md §7, or a URL",
    )  # fmt: skip
    read_on = models.DateField(_("read on"), help_text="when the source was read")
    origin = models.CharField(
        max_length=10, choices=Origin.choices, default=Origin.STAFF, editable=False
    )
    note = models.CharField(_("note"), max_length=300, blank=True, default="")

    class Meta:
        abstract = True


class CudaToolkit(ReferenceRow):
    """A CUDA toolkit release and the driver its GA release needs (Linux x86_64)."""

    version = models.CharField(
        _("CUDA version"), max_length=20, unique=True, validators=[validate_version]
    )
    driver_min = models.CharField(
        _("minimum driver"), max_length=40, validators=[validate_version],
        help_text="the toolkit driver version of its GA release (e.g. 570.26 for 12.8)",
    )  # fmt: skip

    class Meta:
        ordering = ["version"]
        constraints = [
            choices_check("origin", Origin, name="sizing_cudatoolkit_origin_valid"),
        ]

    def __str__(self):
        return f"CUDA {self.version} ≥ {self.driver_min}"


class FrameworkBuild(ReferenceRow):
    """One build of a framework release: the toolkit it was built with and the GPUs it
    carries kernels for (compute capabilities), or the floor its documentation states."""

    framework = models.CharField(max_length=20, choices=Framework.choices)
    version = models.CharField(max_length=20, validators=[validate_version])
    build = models.SlugField(max_length=20, help_text="cu128, rocm6.3…")
    stack = models.CharField(max_length=10, choices=BuildStack.choices)
    toolkit = models.CharField(
        _("CUDA or ROCm version"), max_length=20, validators=[validate_version]
    )
    toolkit_is_minimum = models.BooleanField(
        default=False,
        help_text="the node's ROCm must be at least this (vLLM's documented floor), rather "
        "than within the documented window around it",
    )
    archs = models.CharField(
        _("compute capabilities compiled in"), max_length=200, blank=True, default="",
        help_text="TORCH_CUDA_ARCH_LIST, e.g. 7.5;8.0;8.6;9.0;10.0;12.0 (empty: see the floor)",
    )  # fmt: skip
    ptx = models.BooleanField(_("carries PTX of the newest"), default=False)
    min_compute = models.CharField(
        _("compute capability floor"), max_length=10, blank=True, default="",
        help_text="where the documentation states a floor rather than a list (vLLM: 7.5)",
    )  # fmt: skip

    class Meta:
        ordering = ["framework", "version", "build"]
        constraints = [
            models.UniqueConstraint(
                fields=["framework", "version", "build"], name="sizing_frameworkbuild_one_per_build"
            ),
            choices_check("origin", Origin, name="sizing_frameworkbuild_origin_valid"),
            choices_check("framework", Framework, name="sizing_frameworkbuild_framework_valid"),
            choices_check("stack", BuildStack, name="sizing_frameworkbuild_stack_valid"),
            models.CheckConstraint(
                condition=Q(stack="rocm") | ~Q(archs="") | ~Q(min_compute=""),
                name="sizing_frameworkbuild_cuda_names_its_gpus",
            ),
        ]

    def __str__(self):
        return f"{self.get_framework_display()} {self.version}+{self.build}"


class RocmRelease(ReferenceRow):
    """A ROCm release and the gfx targets its compatibility matrix lists."""

    version = models.CharField(
        _("ROCm version"), max_length=20, unique=True, validators=[validate_version]
    )
    gfx_targets = models.CharField(
        _("gfx targets"), max_length=200, help_text="gfx90a;gfx942;gfx950"
    )

    class Meta:
        ordering = ["version"]
        constraints = [
            choices_check("origin", Origin, name="sizing_rocmrelease_origin_valid"),
        ]

    def __str__(self):
        return f"ROCm {self.version}: {self.gfx_targets}"
