from rest_framework import serializers

from accounts.models import BillingMode
from core.money import DECIMAL_PLACES, MAX_DIGITS
from payments.models import BankTransfer, Card


class CardSerializer(serializers.ModelSerializer):
    default = serializers.BooleanField(source="is_default")

    class Meta:
        model = Card
        fields = ["id", "brand", "last4", "exp_month", "exp_year", "default", "created_at"]


class CardInSerializer(serializers.Serializer):
    payment_method = serializers.RegexField(
        r"^pm_[A-Za-z0-9_]{1,95}$", help_text="pm_… from Stripe.js"
    )
    default = serializers.BooleanField(default=True)


class BalanceSerializer(serializers.Serializer):
    currency = serializers.CharField()
    paid = serializers.DecimalField(MAX_DIGITS, DECIMAL_PLACES, coerce_to_string=True)
    refunded = serializers.DecimalField(MAX_DIGITS, DECIMAL_PLACES, coerce_to_string=True)
    applied = serializers.DecimalField(MAX_DIGITS, DECIMAL_PLACES, coerce_to_string=True)
    balance = serializers.DecimalField(MAX_DIGITS, DECIMAL_PLACES, coerce_to_string=True)


class LimitSerializer(serializers.Serializer):
    currency = serializers.CharField()
    amount = serializers.DecimalField(MAX_DIGITS, DECIMAL_PLACES, coerce_to_string=True)


class BillingSerializer(serializers.Serializer):
    team = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=BillingMode.choices)
    balances = BalanceSerializer(many=True)
    credit_limits = LimitSerializer(many=True)
    payment_terms_days = serializers.IntegerField()
    grace_days = serializers.IntegerField()
    cards = CardSerializer(many=True)
    overdue = serializers.ListField(child=serializers.CharField())


class SetupIntentSerializer(serializers.Serializer):
    id = serializers.CharField()
    client_secret = serializers.CharField()


class StatementInSerializer(serializers.Serializer):
    file = serializers.FileField()


class StatementResultSerializer(serializers.Serializer):
    imported = serializers.IntegerField()
    matched = serializers.IntegerField()
    unmatched = serializers.IntegerField()
    duplicates = serializers.IntegerField()


class TransferSerializer(serializers.ModelSerializer):
    class Meta:
        model = BankTransfer
        fields = [
            "id",
            "reference",
            "booked_on",
            "amount",
            "currency",
            "title",
            "counterparty",
            "state",
            "team",
        ]
