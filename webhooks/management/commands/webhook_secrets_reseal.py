from django.core.management.base import BaseCommand, CommandError

from webhooks.services import secrets_reseal


class Command(BaseCommand):
    help = (
        "Seal every webhook signing secret under the current DJANGO_SECRET_KEY. Run it after "
        "a rotation, before dropping the old key from DJANGO_SECRET_KEY_FALLBACKS."
    )

    def handle(self, *args, **options):
        resealed, lost = secrets_reseal()
        self.stdout.write(f"{resealed} webhook secrets sealed under the current key")
        if lost:
            raise CommandError(
                f"{lost} secrets open under no key in use: their endpoints must be registered "
                "again (or put the key they were sealed under back in the fallbacks)"
            )
