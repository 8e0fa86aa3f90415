from django.db.models import Q, QuerySet

from glossary.models import Term


def term_list(*, language: str, search: str = "") -> QuerySet[Term]:
    terms = Term.objects.filter(language=language)
    if search:
        terms = terms.filter(Q(term__icontains=search) | Q(definition__icontains=search))
    return terms.order_by("position")


def term_get(*, language: str, slug: str) -> Term | None:
    return Term.objects.filter(language=language, slug=slug).first()
