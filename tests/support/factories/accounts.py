"""People and teams: users who signed up, numbered users for races, and teams with their
members in the roles a test needs."""

import factory
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from accounts.models import Membership, Team
from accounts.services.teams import team_create


def person(username: str, password: str, **fields) -> User:
    """A user who signed up and confirmed their address, as everyone who signs in has."""
    email = fields.pop("email", f"{username}@example.com")
    user = get_user_model().objects.create_user(username, email, password, **fields)
    EmailAddress.objects.create(user=user, email=email, verified=True, primary=True)
    return user


class UserFactory(factory.django.DjangoModelFactory):
    """A user with no password and no address: one of many racers or payers, never signed in.
    `UserFactory.create_batch(24)` for a crowd."""

    class Meta:
        model = User

    username = factory.Sequence(lambda n: f"user{n}")

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        return model_class.objects.create_user(*args, **kwargs)


def team_with(owner: User, members: dict[User, str] | None = None, *, name: str = "Acme") -> Team:
    """A team `owner` created (as its owner), with each of `members` in their role."""
    team = team_create(user=owner, name=name)
    for user, role in (members or {}).items():
        Membership.objects.create(team=team, user=user, role=role)
    return team
