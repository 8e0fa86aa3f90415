"""Teams whose buyer details were saved before the checks of issue 54: a country that is not
ISO 3166's (EU, UN, XA "Pseudo-Accents", ZZ "Unknown Region"…), or a VAT ID of another
country than the buyer's. Their quotes are taxed as a consumer's from now on (accounts.buyer
checks the details each time); here each gets a review that staff see in the admin, with the
treatment its quotes had. A frozen copy of the rules as they are in this release, so the
migration stays what it was: `manage.py teams_buyer_recheck` applies later rules."""

from django.conf import settings
from django.db import migrations
from django.db.models import Q
from django.utils import timezone
from stdnum import vatin
from stdnum.eu import vat as eu_vat

_CODES = """
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO
    BQ BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ
    DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP
    GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG
    KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML
    MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE
    PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL
    SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM
    US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW
"""
ISO_3166_1 = frozenset(_CODES.split())
EU = frozenset(c.upper() for c in eu_vat.MEMBER_STATES if c != "xi") | {"GR"}
PREFIX_COUNTRY = {"EL": "GR", "XI": "GB"}
EU_PREFIXES = frozenset({"EL" if c == "GR" else c for c in EU} | {"XI"})


def _vat_id_country(vat_id):
    prefix = vat_id[:2]
    if not prefix.isalpha():
        return None
    country = PREFIX_COUNTRY.get(prefix, prefix)
    if prefix in EU_PREFIXES or (country in ISO_3166_1 and vatin.is_valid(vat_id)):
        return country
    return None


def _treatment(team):
    """What quotes gave the team before this release (core.vat.treatment_for as it was)."""
    if team.country == settings.ANCHORGPU["SELLER"]["COUNTRY"]:
        return "domestic"
    if team.country in EU:
        return "reverse_charge" if team.vat_id else "consumer"
    return "outside_eu"


def review_stored_details(apps, schema_editor):
    Team = apps.get_model("accounts", "Team")
    BuyerReview = apps.get_model("accounts", "BuyerReview")
    reviews, now = [], timezone.now()
    for team in Team.objects.exclude(legal_name="").filter(~Q(country="")).order_by("pk"):
        if team.country not in ISO_3166_1:
            problem = "not_a_country"
        elif team.vat_id and _vat_id_country(team.vat_id) not in (None, team.country):
            problem = "foreign_vat_id"
        else:
            continue
        reviews.append(
            BuyerReview(
                team=team, found_at=now, country=team.country, vat_id=team.vat_id,
                problem=problem, treatment_before=_treatment(team), treatment_now="consumer",
            )
        )  # fmt: skip
    BuyerReview.objects.bulk_create(reviews)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0015_buyer_reviews")]

    operations = [migrations.RunPython(review_stored_details, migrations.RunPython.noop)]
