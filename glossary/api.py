from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, serializers

from glossary.selectors import term_list


class TermSerializer(serializers.Serializer):
    slug = serializers.SlugField()
    term = serializers.CharField()
    definition = serializers.CharField()


class GlossaryQuerySerializer(serializers.Serializer):
    lang = serializers.ChoiceField(choices=["pl", "en"], required=False, default="en")
    q = serializers.CharField(required=False, max_length=100, default="")


class GlossaryListApi(generics.ListAPIView):
    """Glossary terms in one language; definitions explain a concept and guarantee nothing."""

    permission_classes = [permissions.AllowAny]
    serializer_class = TermSerializer
    pagination_class = None

    def get_queryset(self):
        query = GlossaryQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return term_list(language=query.validated_data["lang"], search=query.validated_data["q"])

    @extend_schema(
        parameters=[
            OpenApiParameter("lang", str, enum=["pl", "en"]),
            OpenApiParameter("q", str, description="search in terms and definitions"),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)
