from django.http import Http404
from django.shortcuts import render
from django.utils.translation import get_language

from glossary.content import disclaimer
from glossary.selectors import term_get, term_list


def _language():
    return "pl" if (get_language() or "en").startswith("pl") else "en"


def glossary_page(request):
    language = _language()
    search = request.GET.get("q", "")[:100]
    return render(
        request,
        "glossary/list.html",
        {
            "terms": term_list(language=language, search=search),
            "q": search,
            "disclaimer": disclaimer(language),
            "nav": "glossary",
        },
    )


def term_page(request, slug):
    language = _language()
    term = term_get(language=language, slug=slug)
    if term is None:
        raise Http404
    return render(
        request,
        "glossary/term.html",
        {"term": term, "disclaimer": disclaimer(language), "nav": "glossary"},
    )
