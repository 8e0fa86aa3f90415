"""Every user gets a personal team they own; every API token acts for it as owner.

And a team never loses its last owner: a deferred trigger refuses, at commit, any change
that leaves an existing team without one (whatever path wrote the rows).
"""

from django.db import migrations


def personal_teams(apps, schema_editor):
    User = apps.get_model("auth", "User")
    Team = apps.get_model("accounts", "Team")
    Membership = apps.get_model("accounts", "Membership")
    ApiToken = apps.get_model("accounts", "ApiToken")
    for user in User.objects.filter(personal_team__isnull=True).iterator():
        team = Team.objects.create(name=user.username, personal_for=user)
        Membership.objects.create(team=team, user=user, role="owner")
    for team in Team.objects.filter(personal_for__isnull=False).iterator():
        ApiToken.objects.filter(user_id=team.personal_for_id, team__isnull=True).update(
            team=team, role="owner"
        )


KEEP_AN_OWNER = """
CREATE OR REPLACE FUNCTION accounts_team_keeps_an_owner() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM accounts_team WHERE id = OLD.team_id)
       AND NOT EXISTS (SELECT 1 FROM accounts_membership
                       WHERE team_id = OLD.team_id AND role = 'owner') THEN
        RAISE EXCEPTION 'team % would have no owner', OLD.team_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'accounts_team_keeps_an_owner';
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE CONSTRAINT TRIGGER accounts_team_keeps_an_owner
    AFTER UPDATE OR DELETE ON accounts_membership
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION accounts_team_keeps_an_owner();
"""

DROP = """
DROP TRIGGER IF EXISTS accounts_team_keeps_an_owner ON accounts_membership;
DROP FUNCTION IF EXISTS accounts_team_keeps_an_owner();
"""


class Migration(migrations.Migration):
    dependencies = [("accounts", "0006_teams")]

    operations = [
        migrations.RunPython(personal_teams, migrations.RunPython.noop),
        migrations.RunSQL(KEEP_AN_OWNER, DROP),
    ]
