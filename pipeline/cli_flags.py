"""Command-line flags declared on the fields of a config dataclass, so a knob is written once.

    steps: int = flag("--steps", 300, "optimizer steps in total")

`add_flags(parser, Config)` adds one option per flagged field: the type comes from the annotation
(`X | None` parses as X), a bool field is a switch, and the help ends with the default unless the
default is None (then the help says what None means). `config_from_flags(Config, args)` builds the
dataclass from the parsed namespace. Fields the program fills itself are declared with
`filled_by_program(...)` and get no flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Callable
from typing import Any

FLAG_KEY = "audioscale.flag"
FILLED_BY_PROGRAM_KEY = "audioscale.filled_by_program"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Flag:
    name: str  # "--steps"
    help: str  # may name {placeholders} that `add_flags` fills (paths known only at run time)
    action: str | None = None  # "store_true" or "append"; None: store one value
    parse_text: Callable[[str], Any] | None = None  # argparse `type`; None: the annotation's type
    to_field: Callable[[Any], Any] | None = None  # parsed value -> field value; None: as parsed
    metavar: str | None = None

    @property
    def dest(self) -> str:
        """The argparse namespace attribute (`--batch-size` -> `batch_size`)."""
        return self.name.removeprefix("--").replace("-", "_")


def flag(
    name: str, default: Any, help: str, *, default_factory: Callable[[], Any] | None = None, **options: Any
) -> Any:
    """A dataclass field with its command-line flag."""
    metadata = {FLAG_KEY: Flag(name=name, help=help, **options)}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def filled_by_program(default: Any = None) -> Any:
    """A dataclass field the program sets (not a user's knob): no flag."""
    return dataclasses.field(default=default, metadata={FILLED_BY_PROGRAM_KEY: True})


def field_flag(config_class: type, field_name: str) -> Flag:
    """The flag of one field, e.g. for an error message that tells the user which option to change."""
    field = next(f for f in dataclasses.fields(config_class) if f.name == field_name)
    return field.metadata[FLAG_KEY]


def parse_override(text: str) -> tuple[str, object]:
    """`KEY=VALUE` -> (key, value), the value parsed as JSON when it can be, else kept as text."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--override expects KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw  # a bare string such as decoder=cross


def parse_steps(text: str) -> tuple[int, ...]:
    """`50000,100000` -> (50000, 100000), sorted; an empty string -> ()."""
    try:
        return tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise SystemExit(f"expected comma-separated whole steps such as 50000,100000, got {text!r}") from None


def parse_names(text: str) -> tuple[str, ...]:
    """`lr,warmup-steps` -> ("lr", "warmup-steps")."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_flags(
    parser: argparse.ArgumentParser, config_class: type, *, help_values: dict[str, Any] | None = None
) -> None:
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        spec = field.metadata.get(FLAG_KEY)
        if spec is None:
            continue
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        help_text = spec.help.format(**(help_values or {}))
        value_type = _value_type(hints[field.name])
        if spec.action == "store_true" or value_type is bool:
            parser.add_argument(spec.name, action="store_true", help=help_text)
            continue
        if default is not None and spec.action != "append":
            help_text += f" (default: {default})"
        parser.add_argument(
            spec.name,
            action=spec.action or "store",
            type=spec.parse_text or value_type,
            default=[] if spec.action == "append" else default,
            metavar=spec.metavar,
            help=help_text,
        )


def config_from_flags(config_class: type, args: argparse.Namespace) -> Any:
    values = {}
    for field in dataclasses.fields(config_class):
        spec = field.metadata.get(FLAG_KEY)
        if spec is not None:
            value = getattr(args, spec.dest)
            values[field.name] = spec.to_field(value) if spec.to_field else value
    return config_class(**values)


def _value_type(annotation: Any) -> Any:
    """`float | None` -> float; `str` -> str; a container (dict, list) is left to the flag's parse_text."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return annotation if annotation in (bool, int, float, str) else None
