"""`field__any=[...]`: `field = ANY(%s)` with the values as one array parameter.

`__in` sends one placeholder per value; psycopg binds them on the client, and a polling
round's thousands of node and GPU ids cost more to splice into the statement than the
statement costs the database.
"""

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, ForeignObject, Lookup
from django.db.models.sql.compiler import SQLCompiler

if TYPE_CHECKING:  # the stubs' lookups are generic in their value; Django's are not
    from django.db.models.sql.compiler import _AsSqlType

    _Lookup = Lookup[Iterable[object]]
else:
    _Lookup = Lookup


class AnyOf(_Lookup):
    lookup_name = "any"
    prepare_rhs = False

    # The stubs type a parameter as str | int only; psycopg binds a list as one array.
    def get_db_prep_lookup(  # type: ignore[override]
        self, value: Iterable[object], connection: BaseDatabaseWrapper
    ) -> tuple[str, list[list[object]]]:
        return "%s", [list(value)]

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper) -> "_AsSqlType":
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", [*lhs_params, *rhs_params]


Field.register_lookup(AnyOf)
ForeignObject.register_lookup(AnyOf)  # relations look their lookups up on their own
