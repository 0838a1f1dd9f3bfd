"""The base of every record: a pydantic model that keeps the fields it does not declare (a newer writer's, or
rarely read ones), reads absent ones as their defaults (an older writer's), and writes back what it read, in the
order it read it (so a file read and saved again is the same bytes)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

R = TypeVar("R", bound="Record")

#: A number as the writer stored it: an int stays an int and a float a float (``1`` and ``1.0`` are different
#: bytes in the file; pydantic's ``float`` would turn ``1`` into ``1.0``).
Number = float | int


class Record(BaseModel):
    """A versioned JSON object as a model: declared fields are typed attributes; undeclared ones are kept (as
    attributes too) and written back after the declared ones.

    ``of(x)`` takes a record or its JSON mapping. Mapping reads (``r["field"]``, ``r.get("field")``, ``in``,
    ``r["field"] = v``) are kept for callers that still read records as dicts (scripts, tests, modules not yet
    converted); the package reads attributes. Assignment validates (a mapping assigned to a record field becomes
    that record). A writer can start writing a field at its default from some step on (:meth:`mark_written`) or
    drop one (:meth:`unset`)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)

    @classmethod
    def of(cls: type[R], value: Any) -> R:
        """``value`` as this record: itself when it is one, else validated from its mapping (a record of another
        type is read through its mapping)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, Record):
            value = value.to_dict()
        return cls.model_validate(value)

    def to_dict(self) -> dict:
        """The JSON object (plain Python values, nested records included): the fields it was given or read,
        not the defaults of those it was not (a record writes back what it read)."""
        return self.model_dump(exclude_unset=True)

    def mark_written(self, *names: str) -> None:
        """Write ``names`` from now on even at their defaults (a key the document always had from this step)."""
        self.model_fields_set.update(names)

    def unset(self, name: str) -> None:
        """Drop ``name`` from the document (back to its default, not written)."""
        setattr(self, name, type(self).model_fields[name].get_default(call_default_factory=True))
        self.model_fields_set.discard(name)

    # -- read as a mapping (compatibility for callers that still read dicts) ---------------------------------

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        """Whether the record was given (or read) the field ``key``."""
        return isinstance(key, str) and (key in self.model_fields_set or key in (self.model_extra or {}))

    def __eq__(self, other: object) -> bool:
        """Equal to a record of the same fields, or to its JSON mapping."""
        if isinstance(other, dict):
            return self.to_dict() == other
        if isinstance(other, Record):
            return self.to_dict() == other.to_dict()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the mapping it stands for

    def keys(self) -> list[str]:
        """The fields the record was given or read (so ``{**record}`` and ``dict(record)`` are its fields)."""
        return [k for k in type(self).model_fields if k in self.model_fields_set] + list(self.model_extra or {})

    def __iter__(self):  # type: ignore[override]  # a mapping iterates its keys
        return iter(self.keys())

    def __len__(self) -> int:
        """The number of fields given or read (an empty record is falsy, as its empty mapping was). Counted from
        the set of fields given (the extras are among them), not by listing :meth:`keys`: ``if record`` is on the
        early-stopping path once per stored sample per look."""
        return len(self.model_fields_set | (self.model_extra or {}).keys())

    def items(self) -> list[tuple[str, Any]]:
        """``(field, value)`` for :meth:`keys`."""
        return [(k, getattr(self, k)) for k in self.keys()]

    def update(self, fields: dict | None = None, /, **more: Any) -> None:
        """Set several fields at once (each validated, as ``dict.update``)."""
        for k, v in {**(fields or {}), **more}.items():
            setattr(self, k, v)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key`` (as ``dict.get``: ``default`` when the record was not given that field)."""
        return getattr(self, key) if key in self else default


def json_default(value: Any) -> Any:
    """``json.dumps(..., default=json_default)``: a record as its JSON mapping, anything else JSON does not know
    as its string (times, paths)."""
    return value.to_dict() if isinstance(value, Record) else str(value)
