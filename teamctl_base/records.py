"""``Record``: a frozen value declared like a pydantic model that needs no pydantic to be made,
parsed or dumped in the common case (docs/ARCHITECTURE.md, "Start-up and benchmarks").

A subclass declares its fields by annotation, as a pydantic model would::

    class TaskClaimed(Record):
        task_id: str
        epoch: int
        human: bool = False
        tokens: int = Field(default=0, ge=0)

and behaves as the frozen pydantic model of the same declarations (its *twin*, built with
``frozen=True, extra="forbid"`` and the record's ``model_config``) behaves: the same fields,
defaults, equality, ``repr``, ``model_dump``, ``model_validate``, refusals and messages. The
record itself only decides the plain cases, on exact types: a ``str`` that is a ``str`` (and
matches its ``pattern``), an ``int`` that is an ``int`` (not a ``bool``), a ``float`` or an
``int`` a float holds exactly, a list or tuple of strings for ``tuple[str, ...]`` (lax only), a
dict with string keys, a literal's string, ``None`` for an optional field, anything for ``Any``.
Whatever else it meets (a value pydantic would coerce or refuse, a missing or unknown key, a
non-JSON value to dump, an option it does not implement) it hands to the twin, built on first
use: then pydantic decides, and raises its own ``ValidationError``. So a command that only
makes and stores well-formed values never imports pydantic, and every other case is pydantic's
by construction; tests/teamctl_base/test_records.py checks the plain cases against the twin.

Supported annotations: ``str``, ``int``, ``float``, ``bool``, ``Any``, ``Literal`` of strings,
``tuple[str, ...]``, ``dict[str, Any]``, and ``X | None`` of those. ``Field`` takes ``default``,
``default_factory``, ``ge`` (numbers), ``pattern`` (strings: a full match decides here) and
``json_key`` (pydantic's ``alias``: the key in dumps by alias and in parsed data).
"""

from __future__ import annotations

import math
import operator
import re
import sys
import types
from collections.abc import Callable, Mapping
from typing import (
    Any,
    ClassVar,
    Literal,
    NoReturn,
    Union,
    dataclass_transform,
    get_args,
    get_origin,
)

__all__ = ["Field", "Record"]

_NO: Any = object()
"""What a fast check returns when it cannot decide: the twin decides."""
_MISSING: Any = object()
_EXACT_FLOAT = 1 << 53
"""An ``int`` within this magnitude is a float exactly (a larger one is left to the twin)."""


class _FieldSpec:
    __slots__ = ("default", "default_factory", "ge", "json_key", "pattern")

    def __init__(
        self,
        default: Any,
        default_factory: Callable[[], Any] | None,
        json_key: str | None,
        pattern: str | None,
        ge: float | None,
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.json_key = json_key
        self.pattern = pattern
        self.ge = ge


def Field(  # spelled as pydantic's, whose declarations it replaces
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    json_key: str | None = None,
    pattern: str | None = None,
    ge: float | None = None,
) -> Any:
    """The options of one field (see the module docstring)."""
    return _FieldSpec(default, default_factory, json_key, pattern, ge)


def _identity(value: Any) -> Any:
    return value


def _check(annotation: Any, spec: _FieldSpec, strict: bool) -> Callable[[Any], Any]:
    """The fast check of one field: the value as the twin would store it, or ``_NO``."""
    if annotation is Any:
        return _identity
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1 or len(get_args(annotation)) != 2:
            raise TypeError(f"unsupported record field type {annotation!r}")
        inner = _check(args[0], spec, strict)
        return lambda v: None if v is None else inner(v)
    if spec.pattern is not None and annotation is not str:
        raise TypeError(f"pattern on a non-string field {annotation!r}")
    if spec.ge is not None and annotation not in (int, float):
        raise TypeError(f"ge on a non-number field {annotation!r}")
    ge = spec.ge
    if annotation is str:
        if spec.pattern is None:
            return lambda v: v if v.__class__ is str else _NO
        # fullmatch accepts no more than pydantic's search for ``^...$`` does
        fullmatch = re.compile(spec.pattern).fullmatch
        return lambda v: v if v.__class__ is str and fullmatch(v) else _NO
    if annotation is bool:
        return lambda v: v if v is True or v is False else _NO
    if annotation is int:
        if ge is None:
            return lambda v: v if v.__class__ is int else _NO
        return lambda v: v if v.__class__ is int and v >= ge else _NO
    if annotation is float:
        low = -float("inf") if ge is None else ge

        def number(v: Any) -> Any:
            if v.__class__ is float:
                return v if v >= low or (ge is None and v != v) else _NO
            if v.__class__ is int and -_EXACT_FLOAT <= v <= _EXACT_FLOAT and v >= low:
                return float(v)
            return _NO

        return number
    if origin is Literal:
        choices = get_args(annotation)
        if not all(c.__class__ is str for c in choices):
            raise TypeError(f"unsupported literal {annotation!r}")
        allowed = frozenset(choices)
        return lambda v: v if v.__class__ is str and v in allowed else _NO
    if origin is tuple and get_args(annotation) == (str, ...):
        kinds = (tuple,) if strict else (tuple, list)

        def strings(v: Any) -> Any:
            if v.__class__ not in kinds:
                return _NO
            for item in v:
                if item.__class__ is not str:
                    return _NO
            return v if v.__class__ is tuple else tuple(v)

        return strings
    if origin is dict and get_args(annotation) == (str, Any):

        def mapping(v: Any) -> Any:
            if v.__class__ is not dict:
                return _NO
            for key in v:
                if key.__class__ is not str:
                    return _NO
            return dict(v)

        return mapping
    raise TypeError(f"unsupported record field type {annotation!r}")


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _plain(value: Any, json: bool) -> Any:
    """``value`` (of an ``Any`` or ``dict`` field) as the twin dumps it, or ``_NO``: plain JSON
    values only, containers rebuilt (tuples become lists in JSON mode)."""
    kind = value.__class__
    if kind in _SCALARS:
        if json and kind is float and not math.isfinite(value):
            return _NO  # pydantic writes null here (a float field keeps it)
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if key.__class__ is not str:
                return _NO
            dumped = _plain(item, json)
            if dumped is _NO:
                return _NO
            out[key] = dumped
        return out
    if kind is list or kind is tuple:
        items = []
        for item in value:
            dumped = _plain(item, json)
            if dumped is _NO:
                return _NO
            items.append(dumped)
        return items if json or kind is list else tuple(items)
    return _NO


def _dumper(annotation: Any) -> Callable[[Any, bool], Any]:
    """How a field's (validated) value dumps: as it is, or through ``_plain``."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        inner = _dumper(next(a for a in get_args(annotation) if a is not type(None)))
        return lambda v, json: None if v is None else inner(v, json)
    if origin is tuple:
        return lambda v, json: list(v) if json else v
    if annotation is Any or origin is dict:
        return _plain
    return lambda v, json: v


class _Slot:
    """One field: its name, the key it is read from, its checks, default and dump."""

    __slots__ = ("annotation", "default", "dump", "factory", "key", "lax", "name", "spec", "strict")

    def __init__(self, name: str, annotation: Any, spec: _FieldSpec) -> None:
        self.name = name
        self.annotation = annotation
        self.spec = spec
        self.key = spec.json_key or name
        self.lax = _check(annotation, spec, strict=False)
        self.strict = _check(annotation, spec, strict=True)
        self.default = spec.default
        self.factory = spec.default_factory
        self.dump = _dumper(annotation)

    def pydantic_field(self) -> Any:
        """The twin's ``Field`` for this one."""
        from pydantic import Field as PydanticField

        options: dict[str, Any] = {}
        spec = self.spec
        if spec.default_factory is not None:
            options["default_factory"] = spec.default_factory
        elif spec.default is not _MISSING:
            options["default"] = spec.default
        if spec.json_key is not None:
            options["alias"] = spec.json_key
        if spec.pattern is not None:
            options["pattern"] = spec.pattern
        if spec.ge is not None:
            options["ge"] = spec.ge
        return PydanticField(**options)


def _resolve(annotation: Any, module: str) -> Any:
    if isinstance(annotation, str):
        return eval(annotation, vars(sys.modules[module]))  # our own declarations
    return annotation


class _RecordMeta(type):
    """Collects a record class's fields from its annotations (its bases' first)."""

    __record_slots__: tuple[_Slot, ...]
    __record_plan__: tuple[tuple[Any, ...], ...]
    """Per field: name, key, name if not the key, lax and strict checks, default, factory."""
    __record_twin__: Any

    def __new__(
        mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any
    ) -> _RecordMeta:
        slots: list[_Slot] = []
        for base in bases:
            slots.extend(getattr(base, "__record_slots__", ()))
        module = namespace.get("__module__", __name__)
        for field_name, raw in namespace.get("__annotations__", {}).items():
            annotation = _resolve(raw, module)
            if annotation is ClassVar or get_origin(annotation) is ClassVar:
                continue
            value = namespace.pop(field_name, _MISSING)
            spec = value if isinstance(value, _FieldSpec) else Field(default=value)
            slots = [s for s in slots if s.name != field_name]
            slots.append(_Slot(field_name, annotation, spec))
        namespace.setdefault("__slots__", ())
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        cls.__record_slots__ = tuple(slots)
        cls.__record_plan__ = tuple(
            (
                s.name,
                s.key,
                None if s.key == s.name else s.name,
                s.lax,
                s.strict,
                s.default,
                s.factory,
            )
            for s in slots
        )
        cls.__record_twin__ = None
        return cls

    def __getattr__(cls, name: str) -> Any:
        """Any other ``model_*`` class attribute (``model_fields``, ``model_json_schema``...)
        is the twin's."""
        if name.startswith("model_"):
            return getattr(_twin(cls), name)
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


def _twin(cls: Any) -> Any:
    """The pydantic model of ``cls``'s declarations, built on first use."""
    twin = cls.__dict__.get("__record_twin__")
    if twin is None:
        from pydantic import ConfigDict, create_model

        fields: Any = {
            slot.name: (slot.annotation, slot.pydantic_field()) for slot in cls.__record_slots__
        }
        twin = create_model(
            cls.__name__,
            __config__=ConfigDict(**cls.model_config),  # type: ignore[typeddict-item]
            __module__=cls.__module__,
            **fields,
        )
        twin.__qualname__ = cls.__qualname__
        cls.__record_twin__ = twin
    return twin


_new = object.__new__
_set = object.__setattr__
_given: Callable[[Any], set[str] | None] = operator.attrgetter("_record_fields_set")
"""The fields given when a record was made (``None``: all); a slot, not a field."""


def _made(cls: Any, values: dict[str, Any], fields_set: set[str] | None) -> Any:
    record = _new(cls)
    _set(record, "__dict__", values)
    _set(record, "_record_fields_set", fields_set)
    return record


def _from_twin(cls: Any, model: Any) -> Any:
    return _made(cls, dict(model.__dict__), set(model.model_fields_set))


def _fast(
    cls: Any, data: Mapping[str, Any], strict: bool, by_name: bool
) -> tuple[dict[str, Any], set[str] | None] | None:
    """The values and given fields (``None``: all) of ``data`` when every value is a plain
    case, else ``None`` (the twin decides)."""
    values: dict[str, Any] = {}
    used = 0
    plan = cls.__record_plan__
    for name, key, other, lax, exact, default, factory in plan:
        value = data.get(key, _MISSING)
        if other is not None and by_name:
            if value is _MISSING:
                value = data.get(other, _MISSING)
            elif other in data:
                return None  # given under both names
        if value is _MISSING:
            if default is not _MISSING:
                values[name] = default
            elif factory is not None:
                values[name] = factory()
            else:
                return None  # missing: the twin's refusal
            continue
        used += 1
        value = exact(value) if strict else lax(value)
        if value is _NO:
            return None
        values[name] = value
    if used != len(data):
        return None  # unknown keys: the twin's refusal
    if used == len(plan):
        return values, None
    return values, {
        name
        for name, key, other, *_ in plan
        if key in data or (by_name and other is not None and other in data)
    }


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(Field,))
class Record(metaclass=_RecordMeta):
    """Base of a frozen record (see the module docstring). Equal when of the same class with
    equal fields; hashable when every field is."""

    __slots__ = ("__dict__", "__weakref__", "_record_fields_set")

    model_config: ClassVar[dict[str, Any]] = {"frozen": True, "extra": "forbid"}
    """The twin's pydantic config (a subclass may add ``populate_by_name``)."""

    def __init__(self, **data: Any) -> None:
        cls = self.__class__
        fast = _fast(cls, data, False, cls.model_config.get("populate_by_name", False))
        if fast is None:
            model = _twin(cls)(**data)
            fast = dict(model.__dict__), set(model.model_fields_set)
        _set(self, "__dict__", fast[0])
        _set(self, "_record_fields_set", fast[1])

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
        **options: Any,
    ) -> Any:
        """``obj`` (a mapping of keys to values) validated, as pydantic's ``model_validate``."""
        if obj.__class__ is cls:
            return obj
        populate = bool(cls.model_config.get("populate_by_name", False))
        if obj.__class__ is dict and not options and by_alias is not False:
            fast = _fast(cls, obj, bool(strict), populate if by_name is None else by_name)
            if fast is not None:
                return _made(cls, *fast)
        model = _twin(cls).model_validate(
            obj, strict=strict, by_alias=by_alias, by_name=by_name, **options
        )
        return _from_twin(cls, model)

    @classmethod
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Any:
        """A record of ``values`` as they are (no checks), the defaults filling the rest."""
        got: dict[str, Any] = {}
        given: set[str] = set()
        for slot in cls.__record_slots__:
            if slot.key in values or slot.name in values:
                got[slot.name] = values[slot.key if slot.key in values else slot.name]
                given.add(slot.name)
            elif slot.factory is not None:
                got[slot.name] = slot.factory()
            else:
                got[slot.name] = slot.default
        return _made(cls, got, given if _fields_set is None else set(_fields_set))

    @property
    def model_fields_set(self) -> set[str]:
        """The fields given explicitly when the record was made."""
        given = _given(self)
        return set(self.__dict__) if given is None else given

    def _as_twin(self) -> Any:
        """The twin model instance holding these values (for what the record leaves to it)."""
        twin = _twin(self.__class__)
        model = _new(twin)
        _set(model, "__dict__", dict(self.__dict__))
        _set(model, "__pydantic_fields_set__", set(self.model_fields_set))
        _set(model, "__pydantic_extra__", None)
        _set(model, "__pydantic_private__", None)
        return model

    def model_dump(
        self, *, mode: str = "python", by_alias: bool | None = None, **options: Any
    ) -> dict[str, Any]:
        """The fields as a dict, as pydantic's ``model_dump`` gives them."""
        if not options and mode in ("python", "json"):
            json = mode == "json"
            out: dict[str, Any] = {}
            values = self.__dict__
            for slot in self.__class__.__record_slots__:
                dumped = slot.dump(values[slot.name], json)
                if dumped is _NO:
                    break
                out[slot.key if by_alias else slot.name] = dumped
            else:
                return out
        dumped_all: dict[str, Any] = self._as_twin().model_dump(
            mode=mode, by_alias=by_alias, **options
        )
        return dumped_all

    def model_dump_json(self, **options: Any) -> str:
        """As pydantic's ``model_dump_json`` (the twin's)."""
        text: str = self._as_twin().model_dump_json(**options)
        return text

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy, ``update`` applied without checks (as pydantic's ``model_copy``)."""
        import copy

        values = copy.deepcopy(self.__dict__) if deep else dict(self.__dict__)
        given = set(self.model_fields_set)
        if update:
            values.update(update)
            given.update(update)
        return _made(self.__class__, values, given)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        setattr(self._as_twin(), name, value)  # pydantic's frozen-instance refusal
        raise AssertionError("unreachable")  # pragma: no cover

    def __delattr__(self, name: str) -> NoReturn:
        delattr(self._as_twin(), name)
        raise AssertionError("unreachable")  # pragma: no cover

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self._fields_text(', ')})"

    def __str__(self) -> str:
        return self._fields_text(" ")

    def _fields_text(self, sep: str) -> str:
        return sep.join(f"{name}={value!r}" for name, value in self.__dict__.items())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_made, (self.__class__, dict(self.__dict__), _given(self)))
