from rest_framework import serializers

from catalog.models import Node


class NodeSerializer(serializers.ModelSerializer):
    region = serializers.CharField(source="region.slug")
    gpu_model = serializers.CharField(source="gpu_model.slug")
    gpu_total = serializers.IntegerField()

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
        ]
