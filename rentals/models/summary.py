"""The capacity read model: what the calendar, the book page, the availability API and
placement's first guess read instead of every live holding of a model. A worker rewrites a
model's rows in one statement (`rentals.services.summary`); each row carries `as_of`, the
instant its figures were computed for. Booking never reads these to decide: the exclusion
constraint and the node lock stay the guarantee."""

from django.db import models
from django.db.models import F, Q

from catalog.models import GpuModel, Node, Region


class CapacitySummary(models.Model):
    """One row per GPU model: when its summary rows were last written, and the change
    version (`rentals.services.summary.capacity_version`) they were written at. Readers use
    the rows only while `as_of` is recent; older or missing, they read the holdings."""

    gpu_model = models.OneToOneField(
        GpuModel, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    as_of = models.DateTimeField()
    version = models.BigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "capacity summaries"

    def __str__(self) -> str:
        return f"capacity of model {self.gpu_model_id} as of {self.as_of:%Y-%m-%d %H:%M:%S}"


class CapacityDay(models.Model):
    """Per model, region and UTC day from `as_of`'s day: the most GPUs free on one node for
    the whole day, the whole nodes free and the GPUs free in all (today from `as_of`), as
    `rentals.sql.capacity.FREE_BY_DAY_IN_REGION` counts them. No unique key: a refresh
    deletes and inserts a model's rows in one statement, single-flight."""

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    max_gpus_on_one_node = models.IntegerField()
    free_whole_nodes = models.IntegerField()
    free_gpus = models.IntegerField()
    as_of = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["gpu_model", "day", "region"], name="rentals_capday_model_day")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_gpus_on_one_node__gte=0, free_whole_nodes__gte=0, free_gpus__gte=0),
                name="rentals_capacityday_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day}: {self.free_gpus} GPUs free (model {self.gpu_model_id})"


class CapacityNode(models.Model):
    """Per active node: its GPUs, those free now and the fewest free at any instant of the
        next 30 days from `as_of` (placement's candidates, fullest first). Like CapacityDay, no
    unique key: a refresh deletes and inserts the model's rows in one statement."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="+")
    gpus = models.IntegerField()
    free_now = models.IntegerField()
    min_free_30d = models.IntegerField()
    as_of = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["gpu_model", "free_now"], name="rentals_capnode_model_free")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(free_now__lte=F("gpus"), min_free_30d__lte=F("free_now")),
                name="rentals_capacitynode_within_node",
            ),
        ]

    def __str__(self) -> str:
        return f"node {self.node_id}: {self.free_now} of {self.gpus} free"


class BookedAheadDay(models.Model):
    """Per model and UTC day from `as_of`'s day: the GPU time allocations hold in that day
    (maintenance windows excluded), in GPU-microseconds, on the model's nodes of any state."""

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    gpu_us = models.BigIntegerField()
    as_of = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["gpu_model", "day"], name="rentals_bookedahead_day")]

    def __str__(self) -> str:
        return f"{self.day}: {self.gpu_us} GPU-µs booked (model {self.gpu_model_id})"
