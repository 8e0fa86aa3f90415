"""`field__any=[...]`: `field = ANY(%s)` with the values as one array parameter.

`__in` sends one placeholder per value; psycopg binds them on the client, and a polling
round's thousands of node and GPU ids cost more to splice into the statement than the
statement costs the database.
"""

from django.db.models import Field, ForeignObject, Lookup


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return "%s", [list(value)]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", [*lhs_params, *rhs_params]


Field.register_lookup(AnyOf)
ForeignObject.register_lookup(AnyOf)  # relations look their lookups up on their own
