from django.contrib import admin

from glossary.models import Term


@admin.register(Term)
class TermAdmin(admin.ModelAdmin):
    list_display = ["term", "slug", "language", "position"]
    list_filter = ["language"]
    search_fields = ["term", "definition", "slug"]
