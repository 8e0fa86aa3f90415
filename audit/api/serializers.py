from rest_framework import serializers

from audit.selectors import ACTIONS


class AuditQueryIn(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(ACTIONS), required=False)
    since = serializers.DateField(required=False, help_text="first day (UTC), inclusive")
    until = serializers.DateField(required=False, help_text="last day (UTC), inclusive")
    cursor = serializers.CharField(required=False, max_length=200, help_text="`next` of a page")


class AuditChangeOut(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.CharField()
    after = serializers.CharField()


class AuditRowOut(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(help_text='a username, or "system: <task>"')
    user = serializers.IntegerField(source="user_id", allow_null=True)
    ip = serializers.CharField(allow_blank=True)
    method = serializers.CharField(allow_blank=True)
    url = serializers.CharField(allow_blank=True)
    token = serializers.IntegerField(source="token_id", allow_null=True, help_text="API token id")
    action = serializers.CharField(help_text="the action's key, as the `action` filter takes")
    action_label = serializers.CharField(help_text="the action in the reader's language")
    object_type = serializers.CharField(source="source")
    object_id = serializers.CharField()
    object = serializers.CharField()
    changes = AuditChangeOut(many=True)


class AuditPageOut(serializers.Serializer):
    results = AuditRowOut(many=True, source="rows")
    next = serializers.CharField(source="next_cursor", allow_null=True)
