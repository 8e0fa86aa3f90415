"""Glossary terms in Polish (the customer's text) and English."""

from django.db import models


class Term(models.Model):
    slug = models.SlugField()
    language = models.CharField(max_length=2, choices=[("pl", "Polski"), ("en", "English")])
    term = models.CharField(max_length=120)
    definition = models.TextField()
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["language", "position"]
        constraints = [
            models.UniqueConstraint(fields=["slug", "language"], name="glossary_term_once"),
        ]

    def __str__(self):
        return self.term
