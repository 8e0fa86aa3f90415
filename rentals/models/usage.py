"""What the staff dashboard reads of closed steps: kept once, since they cannot change."""

from django.db import models

from core.db import choices_check


class Step(models.TextChoices):
    """The dashboard's steps: hours up to a week, days beyond (`rentals.dashboard.step_for`).
    The values are the rollups' bucket names, so one `bucket` names both."""

    HOUR = "hour"
    DAY = "day"


class AllocatedStep(models.Model):
    """GPUs held by allocations at some moment of one closed hour or day (UTC): the
    dashboard's "allocated" line where it can no longer change. Written once per step by
    `rentals.services.usage.allocated_steps_close`, from the step's end on only, and never
    rewritten: a holding's start never moves, a cancel releases only holdings not yet started,
    and an extension or a replacement moves only an end still ahead, so every holding that
    overlaps a step closed before every open transaction began is already there."""

    bucket = models.CharField(max_length=4, choices=Step.choices)
    at = models.DateTimeField(help_text="the step's start")
    gpus = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bucket", "at"], name="rentals_allocatedstep_once"),
            choices_check("bucket", Step, name="rentals_allocatedstep_bucket_valid"),
        ]

    def __str__(self):
        return f"{self.bucket} {self.at}: {self.gpus}"
