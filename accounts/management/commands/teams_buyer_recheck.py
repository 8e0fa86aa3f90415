from django.core.management.base import BaseCommand

from accounts.services.teams import teams_buyer_recheck


class Command(BaseCommand):
    help = (
        "Check every team's stored invoice details against today's rules; open a review "
        "(admin: Accounts → Buyer reviews) for each that no longer passes."
    )

    def handle(self, *args, **options):
        done = teams_buyer_recheck()
        self.stdout.write(
            f"{len(done['opened'])} teams' invoice details no longer pass (reviews opened: "
            f"{done['opened']}); {len(done['closed'])} reviews closed"
        )
