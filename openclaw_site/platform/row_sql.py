"""Statements every request makes, as SQL written once per process instead of compiled per call.

Django compiles a queryset's SQL each time it runs. For the three-table `select_related` a request
makes to find its session (session, assistant, team) that compilation costs about a millisecond of
CPU on a 2-core machine, more than PostgreSQL takes to answer, and every request makes two or three
such reads (its API key, its session, the session's lock). A `RowRead` builds its statement once,
from the models' own field lists, and turns each row back into model instances the way the ORM
does (`Model.from_db`, each field's converters, the joined instances cached on their foreign keys),
so what a caller gets is indistinguishable from the queryset's result and stays in step with the
models. A `RowInsert` does the same for a multi-row insert (an append's messages): each value is
what the ORM would store (`pre_save`, `get_db_prep_save`, skipped for plain ints, strings and aware
datetimes, which it sends as they are), the rows go as one JSON parameter, and rows that would
break a named unique constraint are skipped and reported instead of aborting the transaction, so a
caller can draw again without a savepoint (docs/design.md, Request cost). And
`partial_index_condition` writes a partial index's condition into a query as literals, so that a
prepared statement's generic plan can still use the index.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Generic, TypeVar, cast

from django.db import connection, models
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from django.db.models import BooleanField, Field, ForeignKey, Model, UniqueConstraint
from django.db.models.expressions import RawSQL
from django.db.models.sql import Query

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class _Table:
    """One model of the read: its alias, the foreign key that joins it, and its columns."""

    model: type[Model]
    alias: str
    via: ForeignKey[Any, Any] | None  # the foreign key on the parent table that reaches this one
    parent: int | None  # index of that parent table in the read

    @cached_property
    def fields(self) -> list[Field[Any, Any]]:
        return list(self.model._meta.concrete_fields)

    def columns(self) -> str:
        return ", ".join(f'{self.alias}."{field.column}"' for field in self.fields)


class RowRead(Generic[M]):
    """``SELECT`` one model with the rows its foreign keys reach, as `select_related` would.

    ``related`` names foreign-key paths as `select_related` does (``"assistant"``,
    ``"assistant__team"``); the tables are aliased ``t0`` (the model), ``t1``, … in that order, and
    ``where`` (and ``suffix``: ``FOR NO KEY UPDATE OF t0``) refer to them by those aliases.
    """

    def __init__(self, model: type[M], *related: str, where: str, suffix: str = "") -> None:
        self.model = model
        self.related = related
        self.where = where
        self.suffix = suffix

    @cached_property
    def tables(self) -> list[_Table]:
        """The tables in join order, built on first use (the app registry is ready by then)."""
        tables = [_Table(self.model, "t0", via=None, parent=None)]
        paths: dict[str, int] = {"": 0}
        for path in self.related:
            parent_path, _, name = path.rpartition("__")
            parent = paths[parent_path]
            field = tables[parent].model._meta.get_field(name)
            if not isinstance(field, ForeignKey):
                raise TypeError(f"{path} is not a foreign key of {tables[parent].model.__name__}")
            tables.append(_Table(field.related_model, f"t{len(tables)}", via=field, parent=parent))
            paths[path] = len(tables) - 1
        return tables

    @cached_property
    def sql(self) -> str:
        first, *joined = self.tables
        joins = [
            f'JOIN "{table.model._meta.db_table}" {table.alias} ON {table.alias}."{table.via.target_field.column}"'
            f' = {self.tables[table.parent].alias}."{table.via.column}"'
            for table in joined
            if table.via is not None and table.parent is not None
        ]
        columns = ", ".join(table.columns() for table in self.tables)
        return " ".join(
            [
                f'SELECT {columns} FROM "{first.model._meta.db_table}" t0',
                *joins,
                f"WHERE {self.where}",
                self.suffix,
            ]
        ).strip()

    @cached_property
    def _converters(self) -> list[tuple[int, list[Converter], Any]]:
        """The converters of each column that has any, as the ORM's compiler applies them (JSON, …)."""
        result = []
        index = 0
        for table in self.tables:
            for field in table.fields:
                column = field.get_col(table.alias)
                converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
                if converters:
                    result.append((index, converters, column))
                index += 1
        return result

    def one(self, params: Sequence[Any]) -> M | None:
        """Run the read; the first row as model instances (joined ones cached), or None."""
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        return self._load(row)

    def get(self, params: Sequence[Any]) -> M:
        """Like `one`, but a missing row raises the model's ``DoesNotExist``, as ``QuerySet.get`` does."""
        instance = self.one(params)
        if instance is None:
            raise self.model.DoesNotExist(f"no {self.model.__name__} matches {list(params)}")  # type: ignore[attr-defined]
        return instance

    def all(self, params: Sequence[Any]) -> list[M]:
        """Run the read; every row as model instances, in the statement's order."""
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            rows = cursor.fetchall()
        return [self._load(row) for row in rows]

    def _load(self, row: Sequence[Any]) -> M:
        values = list(row)
        for index, converters, column in self._converters:
            for convert in converters:
                values[index] = convert(values[index], column, connection)
        instances: list[Model] = []
        start = 0
        for table in self.tables:
            end = start + len(table.fields)
            names = [field.attname for field in table.fields]
            instance = table.model.from_db(connection.alias, names, values[start:end])
            if table.via is not None and table.parent is not None:
                table.via.set_cached_value(instances[table.parent], instance)
            instances.append(instance)
            start = end
        return instances[0]  # type: ignore[return-value]


# Fields whose value goes into the insert's JSON as the attribute itself when it is a plain int,
# str or bool (or None), skipping the ORM's per-value preparation, which was most of the Python
# time of a 500-row insert. Exact classes only, so a subclass with its own rules goes the ORM's way.
_PLAIN_FIELDS = frozenset(
    {
        models.BigIntegerField,
        models.BooleanField,
        models.CharField,
        models.ForeignKey,
        models.IntegerField,
        models.PositiveBigIntegerField,
        models.PositiveIntegerField,
        models.PositiveSmallIntegerField,
        models.SmallIntegerField,
        models.TextField,
    }
)
_PLAIN_VALUES = (int, str, bool, type(None))


def _column_values(field: Field[Any, Any], instances: Sequence[Model]) -> list[Any]:
    """One column of an insert, each value as the ORM would store it, ready for JSON."""
    if isinstance(field, models.JSONField):  # the document itself; PostgreSQL parses it into jsonb
        values = [field.pre_save(instance, True) for instance in instances]
        if field.encoder is None:
            return values
        return [
            None if value is None else json.loads(json.dumps(value, cls=field.encoder)) for value in values
        ]
    if type(field) in _PLAIN_FIELDS:
        values = [getattr(instance, field.attname) for instance in instances]
        if all(type(value) in _PLAIN_VALUES for value in values):
            return values
    elif type(field) is models.DateTimeField and not (field.auto_now or field.auto_now_add):
        values = [getattr(instance, field.attname) for instance in instances]
        if all(isinstance(value, datetime.datetime) and value.utcoffset() is not None for value in values):
            return values  # aware: the ORM would send them as they are
    return [field.get_db_prep_save(field.pre_save(instance, True), connection) for instance in instances]


def _json_value(value: Any) -> str:
    """Text PostgreSQL reads back as the column's type, for what JSON has no form of."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot insert a {type(value).__name__} value as JSON")


class RowInsert(Generic[M]):
    """``INSERT`` unsaved instances of ``model`` in one statement, skipping clashes on ``unique``.

    ``unique`` names one of the model's `UniqueConstraint`s: a row that would break it is not
    inserted (``ON CONFLICT … DO NOTHING``), and `insert` returns the rows that were, their
    primary keys set, so the caller can change the others and insert them again. ``returning``
    maps attribute names to SQL expressions over the inserted row: each inserted instance gets
    the expression's value as that attribute (what PostgreSQL made of a value, without reading
    the row again).
    """

    def __init__(self, model: type[M], *, unique: str, returning: Mapping[str, str] | None = None) -> None:
        self.model = model
        self.unique = unique
        self.returning = dict(returning or {})

    @cached_property
    def fields(self) -> list[Field[Any, Any]]:
        return [field for field in self.model._meta.concrete_fields if not field.primary_key]

    @cached_property
    def _unique_fields(self) -> list[Field[Any, Any]]:
        for constraint in self.model._meta.constraints:
            if isinstance(constraint, UniqueConstraint) and constraint.name == self.unique:
                return [self.model._meta.get_field(name) for name in constraint.fields]  # type: ignore[misc]
        raise LookupError(f"{self.model.__name__} has no unique constraint {self.unique}")

    @cached_property
    def _sql(self) -> str:
        """The rows go as one JSON array of objects keyed by column, read back into the table's
        row type by `json_populate_recordset`: one parameter however many rows, encoded by the
        json module's C encoder, where one array parameter per column (Django's bulk insert on
        PostgreSQL) has psycopg dump every element in Python."""
        table = f'"{self.model._meta.db_table}"'
        columns = ", ".join(f'"{field.column}"' for field in self.fields)
        keys = ", ".join(f'"{field.column}"' for field in self._unique_fields)
        return (
            f"INSERT INTO {table} ({columns})"
            f" SELECT {columns} FROM json_populate_recordset(NULL::{table}, %s::json)"
            f' ON CONFLICT ({keys}) DO NOTHING RETURNING "{self.model._meta.pk.column}", {keys}'
            + "".join(f", {expression}" for expression in self.returning.values())
        )

    def build(self, related: Mapping[str, Model], **values: Any) -> M:
        """Return an unsaved instance of the model from its column values, by attname.

        Built positionally, as `Model.from_db` builds a loaded row: Django's keyword path looks up a
        default and sets a descriptor per field, three times the cost for a message row, which an
        append of 500 pays 500 times. A field not in ``values`` gets its default. ``related`` maps a
        foreign key's name to the instance it points at, kept as the loaded instance would keep it.
        """
        args = [
            values.pop(field.attname) if field.attname in values else field.get_default()
            for field in self.model._meta.concrete_fields
        ]
        if values:
            raise TypeError(f"{self.model.__name__} has no column(s) {', '.join(sorted(values))}")
        instance = self.model(*args)
        for name, target in related.items():
            field = self.model._meta.get_field(name)
            setattr(instance, field.attname, target.pk)  # type: ignore[union-attr]
            field.set_cached_value(instance, target)  # type: ignore[union-attr]
        return instance

    def insert(self, instances: Sequence[M]) -> list[M]:
        """Insert ``instances``; return those inserted (now saved, with their pk), in their order."""
        if not instances:
            return []
        names = [field.column for field in self.fields]
        columns = [_column_values(field, instances) for field in self.fields]
        rows = [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
        document = json.dumps(rows, default=_json_value, ensure_ascii=False, separators=(",", ":"))
        with connection.cursor() as cursor:
            cursor.execute(self._sql, [document])
            width = 1 + len(self._unique_fields)
            returned = {tuple(row[1:width]): (row[0], row[width:]) for row in cursor.fetchall()}
        inserted = []
        for instance in instances:
            key = tuple(getattr(instance, field.attname) for field in self._unique_fields)
            if key in returned:
                instance.pk, extras = returned[key]
                instance._state.adding, instance._state.db = False, connection.alias
                for name, value in zip(self.returning, extras, strict=True):
                    setattr(instance, name, value)
                inserted.append(instance)
        return inserted


def partial_index_condition(model: type[Model], index_name: str) -> RawSQL:
    """Return the condition of ``model``'s partial index ``index_name`` as a filter, values written in.

    PostgreSQL may plan a prepared statement once for any values (a generic plan, after five
    runs), and such a plan uses a partial index only when the query states the index's condition
    in literals: ``state = $1`` cannot be proven to lie within ``state IN ('queued', 'running')``.
    Adding this filter beside the ORM's own (``.filter(partial_index_condition(...), state=...)``)
    keeps the index usable; without it the bounded probe of the live task records became a scan
    of every finished one (docs/design.md, Request cost). The columns are qualified by the
    model's table, as Django names it in a query of that model.
    """
    return RawSQL(_condition_sql(model, index_name), (), output_field=BooleanField())


@cache
def _condition_sql(model: type[Model], index_name: str) -> str:
    [index] = [index for index in model._meta.indexes if index.name == index_name]
    query = Query(model=model)
    sql, params = query.build_where(index.condition).as_sql(
        query.get_compiler(connection=connection), connection
    )
    ops = cast(PostgresOperations, connection.ops)  # PostgreSQL only: the project's one database
    composed: str = ops.compose_sql(sql, params)
    return composed.replace("%", "%%")  # no parameters follow
