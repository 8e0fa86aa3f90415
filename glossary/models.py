"""Glossary terms in Polish (the customer's text) and English."""

from django.db import models

from core.db import choices_check


class Language(models.TextChoices):
    PL = "pl", "Polski"
    EN = "en", "English"


class Term(models.Model):
    slug = models.SlugField()
    language = models.CharField(max_length=2, choices=Language.choices)
    term = models.CharField(max_length=120)
    definition = models.TextField()
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["language", "position"]
        constraints = [
            models.UniqueConstraint(fields=["slug", "language"], name="glossary_term_once"),
            choices_check("language", Language, name="glossary_term_language_valid"),
        ]

    def __str__(self):
        return self.term
