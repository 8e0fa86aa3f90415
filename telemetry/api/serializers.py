from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.models import Node
from catalog.software import node_driver_disagrees
from telemetry.models import Flag, FlagKind, Severity


class NodeAgentSerializer(serializers.Serializer):
    credential = serializers.SerializerMethodField(
        help_text="issued (its first characters) or none"
    )
    last_seen_at = serializers.DateTimeField(allow_null=True)
    served_generation = serializers.CharField()
    applied_generation = serializers.CharField()
    applied_at = serializers.DateTimeField(allow_null=True)
    in_sync = serializers.SerializerMethodField(
        help_text="the node applied what it was last served"
    )
    # A declared field: DRF's metaclass takes it off the class, `Serializer.errors` stays.
    errors = serializers.JSONField()  # type: ignore[assignment]
    version = serializers.CharField(source="agent_version")

    def get_credential(self, agent) -> str | None:
        return f"{agent.hint}…" if agent.key_hash else None

    def get_in_sync(self, agent) -> bool:
        return bool(agent.served_generation) and agent.applied_generation == agent.served_generation


class NodeSoftwareSerializer(serializers.Serializer):
    driver = serializers.CharField(source="driver_version", help_text="empty: unknown")
    cuda = serializers.CharField(
        source="cuda_version", help_text="the highest CUDA the driver supports; empty: unknown"
    )
    rocm = serializers.CharField(source="rocm_version", help_text="empty: unknown")
    os = serializers.SerializerMethodField()
    kernel = serializers.SerializerMethodField()
    gpus = serializers.SerializerMethodField(help_text="index, name, compute_cap or gfx_target")
    reported_at = serializers.DateTimeField(source="software_reported_at", allow_null=True)
    exporter_driver = serializers.CharField(
        source="exporter_driver_version", help_text="the exporter's DCGM_FI_DRIVER_VERSION label"
    )
    disagreement = serializers.SerializerMethodField(
        help_text="the exporter names another driver than the agent (the agent's wins)"
    )

    def get_os(self, node) -> str:
        return (node.software or {}).get("os", "")

    def get_kernel(self, node) -> str:
        return (node.software or {}).get("kernel", "")

    def get_gpus(self, node) -> list[dict]:
        return (node.software or {}).get("gpus", [])

    def get_disagreement(self, node) -> bool:
        return node_driver_disagrees(node)


class NodeSerializer(serializers.ModelSerializer):
    region = serializers.CharField(source="region.slug")
    gpu_model = serializers.CharField(source="gpu_model.slug")
    gpu_total = serializers.IntegerField()
    agent = serializers.SerializerMethodField()
    software = NodeSoftwareSerializer(source="*", help_text="as the node's agent reported it")

    @extend_schema_field(NodeAgentSerializer(allow_null=True))
    def get_agent(self, node: Node) -> dict[str, Any] | None:
        agent = getattr(node, "agent", None)
        return NodeAgentSerializer(agent).data if agent else None

    class Meta:
        model = Node
        fields = [
            "hostname",
            "region",
            "gpu_model",
            "exporter",
            "state",
            "health",
            "health_detail",
            "last_poll_at",
            "last_good_poll_at",
            "gpu_total",
            "ssh_host",
            "ssh_port",
            "agent",
            "software",
        ]


class FlagSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname")
    gpu = serializers.SerializerMethodField()
    acknowledged_by = serializers.SerializerMethodField()
    open = serializers.SerializerMethodField()

    class Meta:
        model = Flag
        fields = [
            "id", "node", "gpu", "kind", "severity", "detail", "opened_at", "last_seen_at",
            "closed_at", "open", "acknowledged_at", "acknowledged_by", "note",
        ]  # fmt: skip

    def get_gpu(self, flag) -> dict | None:
        return {"index": flag.gpu.index, "uuid": flag.gpu.uuid} if flag.gpu_id else None

    def get_acknowledged_by(self, flag) -> str | None:
        return flag.acknowledged_by.username if flag.acknowledged_by_id else None

    def get_open(self, flag) -> bool:
        return flag.closed_at is None


class FlagFilterSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["open", "closed", "all"], default="open")
    kind = serializers.ChoiceField(choices=FlagKind.choices, required=False)
    severity = serializers.ChoiceField(choices=Severity.choices, required=False)
    node = serializers.CharField(required=False, max_length=255)


class FlagAcknowledgeSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class PrometheusTargetSerializer(serializers.Serializer):
    """One `http_sd_configs` target group: a node's exporter and the labels its series get."""

    targets = serializers.ListField(child=serializers.CharField(), help_text="`host:port`")
    labels = serializers.DictField(
        child=serializers.CharField(),
        help_text="`__metrics_path__`, `__scheme__`, `instance` and `anchorgpu_node` (the "
        "hostname), `anchorgpu_model` and `anchorgpu_region` (slugs)",
    )
