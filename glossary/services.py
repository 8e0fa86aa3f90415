from typing import TYPE_CHECKING

from glossary.content import ENGLISH, SLUGS, polish_entries

if TYPE_CHECKING:
    from glossary.models import Term


def glossary_terms_load(*, term_model: "type[Term] | None" = None) -> int:
    """Upsert the customer's Polish terms and our English ones (the data migration runs this)."""
    if term_model is None:
        from glossary.models import Term

        term_model = Term
    polish, _ = polish_entries()
    count = 0
    for position, (slug, (pl_term, pl_def), (en_term, en_def)) in enumerate(
        zip(SLUGS, polish, ENGLISH, strict=True)
    ):
        for language, term, definition in (("pl", pl_term, pl_def), ("en", en_term, en_def)):
            term_model.objects.update_or_create(
                slug=slug,
                language=language,
                defaults={"term": term, "definition": definition, "position": position},
            )
            count += 1
    return count
