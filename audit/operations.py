"""A pgtrigger operation that installs a trigger on another app's model, from audit's own
migrations.

pghistory registers its triggers on the tracked model (`Allocation`, `Membership`, …), so
`makemigrations` would write them into the tracked apps' migrations: rentals, accounts,
catalog and telemetry would then depend on audit's tables, which sit above them. Instead
audit's migration installs them with `AddTriggerTo`, which is pgtrigger's `AddTrigger` with
the tracked model's app named: it adds the trigger to that model's migration state (so the
autodetector, comparing state and models, finds nothing to do) and installs it in the
database, and removes it again when audit is migrated backwards.

Should a tracked model's tracked fields change later, `makemigrations` writes the
Remove/AddTrigger pair into the tracked app; move it here as `RemoveTriggerFrom` /
`AddTriggerTo` the same way.
"""

from pgtrigger.migrations import AddTrigger, RemoveTrigger


class _OnAppLabel:
    """Runs a pgtrigger operation on the model of `self.app_label`, whatever app's migration
    holds the operation."""

    app_label: str

    def state_forwards(self, app_label, state):
        super().state_forwards(self.app_label, state)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        super().database_forwards(self.app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        super().database_backwards(self.app_label, schema_editor, from_state, to_state)

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        return name, args, {"app_label": self.app_label, **kwargs}


class AddTriggerTo(_OnAppLabel, AddTrigger):
    def __init__(self, app_label: str, model_name: str, trigger) -> None:
        super().__init__(model_name=model_name, trigger=trigger)
        self.app_label = app_label

    def describe(self) -> str:
        return f"Create trigger {self.trigger.name} on model {self.app_label}.{self.model_name}"


class RemoveTriggerFrom(_OnAppLabel, RemoveTrigger):
    def __init__(self, app_label: str, model_name: str, name: str) -> None:
        super().__init__(model_name=model_name, name=name)
        self.app_label = app_label
