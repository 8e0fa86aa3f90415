"""The capacity read model: what the calendar, the book page, the availability API and
placement's first guess read instead of every live holding of a model. A worker refreshes a
model's rows in one statement (`rentals.services.summary`): the nodes whose figures changed
(per-node shares in CapacityNodeDays, node counts per day in CapacityBucket), or every row
once a day. Each row carries `as_of`, the instant its figures were computed for; the model's
CapacitySummary.as_of is the instant all of them stand as of (what readers check). Booking
never reads these to decide: the exclusion constraint and the node lock stay the
guarantee."""

from django.contrib.postgres.fields import ArrayField
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
    `rentals.sql.capacity.FREE_BY_DAY_IN_REGION` counts them, from the day's CapacityBucket
    rows. No unique key: a refresh deletes and inserts the rows it changes in one statement,
    single-flight."""

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
    next 30 days from `as_of` (placement's candidates, fullest first), which still stand at
    the summary's as_of (a refresh rewrites a node's row when they change). Like
    CapacityDay, no unique key: a refresh deletes and inserts rows in one statement."""

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


class CapacityNodeDays(models.Model):
    """Per node of a model, in any state: its own share of the model's day rows, so a refresh
    of a few nodes (those a change named, those whose holdings start or end by time alone)
    subtracts their old share and adds the new one instead of reading every holding.

    `counted` (active, with GPUs): the node counts in CapacityDay (through CapacityBucket)
    and CapacityNode. Its GPUs held per day from `first_day` (the UTC day of the refresh
    that computed it: a later day's refresh reads it shifted by the days between) is a step
    function: from day `busy_from[j]` on, `busy[j]` of them, 0 before the first step. Its share of BookedAheadDay is kept as that refresh adds it up: per day
    `booked_day[j]`, `booked_us[j]` GPU-µs of partial days, and `booked_whole[j]` GPUs held
    whole days from that day on (a running sum, times a day). `due_at`: the first instant its
    figures change by time alone (a holding starting or ending, or entering CapacityNode's
    30-day horizon); NULL where none. No foreign key on the node
    or the region: a deleted node's row stays until a refresh subtracts it."""

    node = models.ForeignKey(
        Node, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    region = models.ForeignKey(
        Region, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    gpus = models.IntegerField()
    counted = models.BooleanField()
    busy_from = ArrayField(models.IntegerField())
    busy = ArrayField(models.IntegerField())
    booked_day = ArrayField(models.IntegerField())
    booked_us = ArrayField(models.BigIntegerField())
    booked_whole = ArrayField(models.BigIntegerField())
    due_at = models.DateTimeField(null=True)
    first_day = models.DateField()
    as_of = models.DateTimeField()

    class Meta:
        verbose_name_plural = "capacity node days"
        indexes = [
            models.Index(fields=["node", "gpu_model"], name="rentals_capnodedays_node"),
            models.Index(fields=["gpu_model", "due_at"], name="rentals_capnodedays_due"),
        ]

    def __str__(self) -> str:
        return f"node {self.node_id}'s days (model {self.gpu_model_id})"


class CapacityBucket(models.Model):
    """Per model, region and UTC day from `as_of`'s day: how many counted nodes of `gpus`
    GPUs have `busy` of them held that day. A day's CapacityDay figures follow from its
    buckets (the most free on one node, the nodes with none busy, the GPUs free), and a
    node's change moves it between buckets: the model's day rows are recomputed from these,
    never from every holding. Only buckets with nodes are kept."""

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    region = models.ForeignKey(
        Region, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    day = models.DateField()
    gpus = models.IntegerField()
    busy = models.IntegerField()
    nodes = models.IntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["gpu_model", "day", "region"], name="rentals_capbucket_day")
        ]
        constraints = [
            models.CheckConstraint(condition=Q(nodes__gt=0), name="rentals_capacitybucket_nodes"),
        ]

    def __str__(self) -> str:
        return f"{self.day}: {self.nodes} nodes of {self.gpus} with {self.busy} busy"


class CapacityChange(models.Model):
    """A node whose holdings changed (`node` NULL: any of the model's, read them all), written
    inside the changing transaction, so the change and its mark commit together; the model's
    next refresh recomputes those nodes and deletes the marks its snapshot saw. Without a
    foreign key on the node: a deleted node is refreshed (its rows removed) like any other."""

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    node = models.ForeignKey(
        Node, null=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )

    def __str__(self) -> str:
        return f"model {self.gpu_model_id}: node {self.node_id or 'all'} changed"
