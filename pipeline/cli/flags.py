"""Command-line flags declared on the fields of a config dataclass, so a knob is written once.

    steps: int = flag("--steps", 300, "optimizer steps in total")

`add_flags(parser, Config)` adds one option per flagged field: the type comes from the annotation
(`X | None` parses as X), a bool field is a switch, and the help ends with the default unless the
default is None (then the help says what None means). `config_from_flags(Config, args)` builds the
dataclass from the parsed namespace. Fields the program fills itself are declared with
`filled_by_program(...)` and get no flag. A field declared with `section(Other)` holds a nested
config whose flags are added (and read back) with the outer one's, with its own table in a
--config file. A field declared with `grouped(Other, title)` is a part of one config, as
torchtitan's job config groups its settings: its flags are listed under the title in --help, and
its fields keep their names in the outer config's table (see `flat_fields`).

`parse_flags(parser, Config, argv, table=...)` also reads `--config FILE.toml` (`add_config_file_flag`):
the file is a recipe, one TOML table for the config's own fields (named `table`) and one per
section (named after the section's field), keyed by field name. A grouped part's fields are keys of
the config's own table, or of a subtable named after the part (`[pretrain.optim]`). Its values become the parser's
defaults, so a flag given on the command line overrides the file, and a key the config does not
declare is an error naming the key and the file: a typo must not silently run the default.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tomllib
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.cli.errors import UserError

FLAG_KEY = "audioscale.flag"
FILLED_BY_PROGRAM_KEY = "audioscale.filled_by_program"
SECTION_KEY = "audioscale.section"
GROUP_KEY = "audioscale.group"
CONFIG_FILE_DEST = "config_file"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Flag:
    name: str  # "--steps"
    help: str  # may name {placeholders} that `add_flags` fills (paths known only at run time)
    action: str | None = None  # "store_true" or "append"; None: store one value
    parse_text: Callable[[str], Any] | None = None  # argparse `type`; None: the annotation's type
    to_field: Callable[[Any], Any] | None = None  # parsed value -> field value; None: as parsed
    metavar: str | None = None
    choices: Sequence[Any] | None = None
    nargs: str | None = None  # argparse's, e.g. "+" for `--only prep evaluate`
    # Must be given (on the command line or in the --config file); checked by `parse_flags`.
    required: bool = False
    # Fields sharing a name here are alternatives: at most one on the command line, exactly one in all.
    one_of: str | None = None

    @property
    def dest(self) -> str:
        """The argparse namespace attribute (`--batch-size` -> `batch_size`)."""
        return self.name.removeprefix("--").replace("-", "_")


@dataclasses.dataclass(frozen=True)
class FromFile:
    """A default that came from the --config file: already a field value, so `to_field` is skipped."""

    value: Any

    def __str__(self) -> str:  # what --help prints as the default
        return str(self.value)


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


def section(config_class: type) -> Any:
    """A field holding a nested config (its own flags, its own table in a --config file)."""
    return dataclasses.field(default_factory=config_class, metadata={SECTION_KEY: config_class})


def grouped(part_class: type, title: str) -> Any:
    """A field holding one part of a config: its flags listed under `title`, its keys in the config's table."""
    return dataclasses.field(default_factory=part_class, metadata={GROUP_KEY: (part_class, title)})


def section_class(config_class: type, field_name: str) -> type:
    """The class a `section` or `grouped` field holds."""
    field = next(f for f in dataclasses.fields(config_class) if f.name == field_name)
    return _nested_class(field)


def flat_fields(config_class: type) -> list[tuple[str, str]]:
    """(part, field) for every field of a config made of `grouped` parts: the flat names, each unique."""
    found = [
        (field.name, inner.name)
        for field in dataclasses.fields(config_class)
        for inner in dataclasses.fields(_nested_class(field))
    ]
    names = [name for _, name in found]
    assert len(names) == len(set(names)), f"{config_class.__name__}: a field name is in two parts"
    return found


def field_flag(config_class: type, field_name: str) -> Flag:
    """The flag of one field (its sections' and parts' included), e.g. for an error message that
    tells the user which option to change."""
    return next(spec for field, spec in flagged_fields(config_class) if field.name == field_name)


def _nested_class(field: dataclasses.Field) -> type:
    if SECTION_KEY in field.metadata:
        return field.metadata[SECTION_KEY]
    return field.metadata[GROUP_KEY][0]


def _is_nested(field: dataclasses.Field) -> bool:
    return SECTION_KEY in field.metadata or GROUP_KEY in field.metadata


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


def parse_betas(text: str) -> tuple[float, float]:
    """`0.9,0.999` -> (0.9, 0.999): Adam's two decay rates, each in [0, 1)."""
    try:
        betas = tuple(float(part) for part in text.split(","))
    except ValueError:
        betas = ()
    if len(betas) != 2 or not all(0.0 <= beta < 1.0 for beta in betas):
        raise SystemExit(f"expected two comma-separated decay rates in [0, 1) such as 0.9,0.999, got {text!r}")
    return betas


def parse_names(text: str) -> tuple[str, ...]:
    """`lr,warmup-steps` -> ("lr", "warmup-steps")."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def flagged_fields(config_class: type) -> list[tuple[dataclasses.Field, Flag]]:
    """Every flagged field of the config and of its sections, in declaration order."""
    found = []
    for field in dataclasses.fields(config_class):
        if _is_nested(field):
            found += flagged_fields(_nested_class(field))
        elif FLAG_KEY in field.metadata:
            found.append((field, field.metadata[FLAG_KEY]))
    return found


def add_flags(parser: Any, config_class: type, *, help_values: dict[str, Any] | None = None) -> None:
    """One option per flagged field of the config and its sections; alternatives (`one_of`) exclude each other."""
    hints = typing.get_type_hints(config_class)
    groups: dict[str, Any] = {}  # one argparse mutually exclusive group per `one_of`
    for field in dataclasses.fields(config_class):
        if SECTION_KEY in field.metadata:
            add_flags(parser, field.metadata[SECTION_KEY], help_values=help_values)
            continue
        if GROUP_KEY in field.metadata:
            part_class, title = field.metadata[GROUP_KEY]
            add_flags(parser.add_argument_group(title), part_class, help_values=help_values)
            continue
        spec = field.metadata.get(FLAG_KEY)
        if spec is None:
            continue
        target = parser
        if spec.one_of is not None:
            if spec.one_of not in groups:
                groups[spec.one_of] = parser.add_mutually_exclusive_group()
            target = groups[spec.one_of]
        _add_one_flag(target, spec, _declared_default(field), hints[field.name], help_values or {})


def _add_one_flag(target, spec: Flag, default: Any, annotation: Any, help_values: dict[str, Any]) -> None:
    help_text = spec.help.format(**help_values)
    value_type = _value_type(annotation)
    if spec.action == "store_true" or value_type is bool:
        target.add_argument(spec.name, action="store_true", help=help_text)
        return
    if default not in (None, ()) and spec.action != "append":
        help_text += f" (default: {default})"
    target.add_argument(
        spec.name,
        action=spec.action or "store",
        type=spec.parse_text or value_type,
        default=[] if spec.action == "append" else default,
        choices=spec.choices,
        metavar=spec.metavar,
        help=help_text,
        **({"nargs": spec.nargs} if spec.nargs else {}),
    )


def config_from_flags(config_class: type, args: argparse.Namespace) -> Any:
    """The config (sections included) from a parsed namespace; --config values are used as given."""
    values = {}
    for field in dataclasses.fields(config_class):
        if _is_nested(field):
            values[field.name] = config_from_flags(_nested_class(field), args)
            continue
        spec = field.metadata.get(FLAG_KEY)
        if spec is None:
            continue
        value = getattr(args, spec.dest)
        if isinstance(value, FromFile):
            values[field.name] = value.value
        else:
            values[field.name] = spec.to_field(value) if spec.to_field else value
    return config_class(**values)


def add_config_file_flag(parser: argparse.ArgumentParser, *, tables: str) -> None:
    """`--config FILE.toml`: a recipe whose values the flags override (see the module doc)."""
    parser.add_argument(
        "--config",
        dest=CONFIG_FILE_DEST,
        metavar="FILE.toml",
        default=None,
        help=f"a recipe of settings, TOML tables {tables} keyed by field name; flags given here override it",
    )


def parse_flags(
    parser: argparse.ArgumentParser, config_class: type, argv: Sequence[str] | None, *, table: str
) -> tuple[Any, argparse.Namespace]:
    """Parse argv over the --config file's values; the config, and the namespace for flags outside it."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config", dest=CONFIG_FILE_DEST, default=None)
    known, _ = early.parse_known_args(argv)
    if known.config_file is not None:  # its errors name the file and key: one line, no usage dump
        parser.set_defaults(**file_defaults(config_class, Path(known.config_file), table=table))
    args = parser.parse_args(argv)
    check_required(parser, config_class, args)
    return config_from_flags(config_class, args), args


def file_defaults(config_class: type, path: Path, *, table: str) -> dict[str, Any]:
    """The --config file's values as argparse defaults (by dest); ValueError names the file and key."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:  # a binary file: the codec's message names neither file nor flag
        raise UserError(
            f"--config {path}: not a TOML text file (byte {error.object[error.start]:#04x} at offset {error.start} "
            "is not UTF-8); pass a TOML text file of settings"
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise UserError(f"--config {path}: cannot be read as TOML ({error})") from None
    classes = {table: config_class} | {
        field.name: field.metadata[SECTION_KEY]
        for field in dataclasses.fields(config_class)
        if SECTION_KEY in field.metadata
    }
    defaults = {}
    for table_name, entries in document.items():
        if table_name not in classes or not isinstance(entries, dict):
            raise ValueError(f"--config {path}: unknown table [{table_name}]; the tables are {', '.join(classes)}")
        defaults |= _table_defaults(classes[table_name], entries, where=f"--config {path}: [{table_name}]")
    return defaults


def _table_defaults(config_class: type, entries: dict[str, Any], *, where: str) -> dict[str, Any]:
    """One table's values by dest: the config's flagged fields and its grouped parts' (flat, or in a subtable)."""
    fields, hints = _table_fields(config_class)
    parts = {f.name: _nested_class(f) for f in dataclasses.fields(config_class) if GROUP_KEY in f.metadata}
    defaults = {}
    for key, value in entries.items():
        if key in parts and isinstance(value, dict):
            defaults |= _table_defaults(
                parts[key], value, where=f"{where.removesuffix(']')}.{key}]"
            )  # [pretrain.optim]
            continue
        if key not in fields:
            raise ValueError(f"{where} has unknown key {key!r}; the keys are {', '.join(fields)}")
        spec = fields[key].metadata[FLAG_KEY]
        value = _coerce(value, hints[key], where=f"{where} {key}")
        if spec.choices is not None and value not in spec.choices:
            raise ValueError(f"{where} {key} = {value!r} is not one of {', '.join(map(str, spec.choices))}")
        if spec.action == "append":  # flags given too are appended after the file's items
            defaults[spec.dest] = list(value.items()) if isinstance(value, dict) else list(value)
        else:
            defaults[spec.dest] = FromFile(value)
    return defaults


def _table_fields(config_class: type) -> tuple[dict[str, dataclasses.Field], dict[str, Any]]:
    """The flagged fields a config's table may name, its grouped parts' included, and their annotations."""
    fields = {f.name: f for f in dataclasses.fields(config_class) if FLAG_KEY in f.metadata}
    hints = dict(typing.get_type_hints(config_class))
    for field in dataclasses.fields(config_class):
        if GROUP_KEY in field.metadata:
            part_fields, part_hints = _table_fields(_nested_class(field))
            fields |= part_fields
            hints |= part_hints
    return fields, hints


def _coerce(value: Any, annotation: Any, *, where: str) -> Any:
    """A TOML value as the field's type: int -> float, str -> Path, array -> tuple; a mismatch is an error."""
    base = _without_none(annotation)
    origin = typing.get_origin(base) or base
    if origin is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin is Path and isinstance(value, str):
        return Path(value)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if isinstance(origin, type) and origin is not Path and not isinstance(value, origin):
        raise ValueError(f"{where} = {value!r} should be of type {origin.__name__}")
    if origin is int and isinstance(value, bool):
        raise ValueError(f"{where} = {value!r} should be a whole number")
    return value


def check_required(
    parser: argparse.ArgumentParser, config_class: type, args: argparse.Namespace, *, file_holds_it: bool = True
) -> None:
    """Required flags and `one_of` alternatives, satisfied by the command line or the --config file.

    A flag given for one alternative replaces the file's choice of another (the flag overrides).
    `file_holds_it`: the --config file's tables include this config's (a command without the flag never)."""
    alternatives: dict[str, list[Flag]] = {}
    has_file = file_holds_it and any(action.dest == CONFIG_FILE_DEST for action in parser._actions)
    for _, spec in flagged_fields(config_class):
        if spec.required and getattr(args, spec.dest) is None:
            or_file = " (or in the --config file)" if has_file else ""
            parser.error(f"the following arguments are required: {spec.name}{or_file}")
        if spec.one_of is not None:
            alternatives.setdefault(spec.one_of, []).append(spec)
    for specs in alternatives.values():
        given = [s for s in specs if getattr(args, s.dest) is not None]
        on_command_line = [s for s in given if not isinstance(getattr(args, s.dest), FromFile)]
        for spec in given if on_command_line else ():
            if spec not in on_command_line:
                setattr(args, spec.dest, None)
        if len(on_command_line or given) != 1:
            names = " ".join(s.name for s in specs)
            parser.error(f"give exactly one of the arguments {names}")


def _declared_default(field: dataclasses.Field) -> Any:
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default


def _without_none(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return annotation


def _value_type(annotation: Any) -> Any:
    """`float | None` -> float; `str` -> str; a container (dict, list) is left to the flag's parse_text."""
    annotation = _without_none(annotation)
    return annotation if annotation in (bool, int, float, str, Path) else None
