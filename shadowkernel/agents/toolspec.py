"""What a tool is, for a model: its name, description, parameters' JSON schema and hints.

A method of the tool table becomes a tool with `@tool(hints, param="description", ...)`;
`spec_of(method)` reads it back as a `ToolSpec` (the signature gives the types and defaults,
the docstring the description, the return type, a TypedDict of `agents/shapes.py`, the
output schema). Every parameter the model fills, and every field of a result, must be
described (a field as `Annotated[type, Doc("...")]`), or `spec_of` refuses the tool.
Keyword-only parameters are the host's (a cancel event, a progress callback): they never
reach a schema. Pure: no MCP types, no I/O; the MCP server and a
tool-calling agent (OpenAI, Anthropic) derive their schemas from the same `ToolSpec`.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from typing_extensions import Doc, is_typeddict

F = TypeVar("F", bound=Callable[..., Any])
REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Hints:
    """MCP's tool annotations: what a host may assume before it calls (hosts ask the user
    before a tool that is not read-only, and warn about a destructive one)."""

    read_only: bool
    destructive: bool = False  # may undo or overwrite what is there (only with read_only False)
    idempotent: bool = False  # calling twice with the same arguments changes nothing more
    open_world: bool = False  # reaches beyond the workspace (the network)

    def as_mcp(self) -> dict[str, bool]:
        return {"readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent, "openWorldHint": self.open_world}  # fmt: skip


READS = Hints(read_only=True, idempotent=True)
STAGES = Hints(read_only=False)  # a new version; earlier ones stay (nothing is lost)


@dataclass(frozen=True)
class Bounded:
    """A number parameter's description with the bounds the tool enforces, stated in its
    schema too (JSON Schema's `minimum`, `maximum`, `exclusiveMinimum`): a model or a host's
    validator learns them before a call is refused."""

    description: str
    bounds: dict[str, float]


def bounded(description: str, **bounds: float) -> Bounded:
    """`bounded("seconds ...", exclusiveMinimum=0)`: a description with its bounds."""
    return Bounded(description, bounds)


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any  # the Python type, resolved
    description: str
    default: Any = REQUIRED
    bounds: tuple[tuple[str, float], ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def schema(self) -> dict[str, Any]:
        found = {**json_schema(self.annotation), **dict(self.bounds),
                 "description": self.description}  # fmt: skip
        if not self.required:
            found["default"] = self.default
        return found


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...]
    hints: Hints
    result: Any  # the result's type (a TypedDict): the output schema
    host: tuple[str, ...]  # keyword-only parameters the host may pass (cancel, progress)

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (draft 2020-12, as MCP and both APIs take)."""
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of the result, each field described (MCP's `outputSchema`)."""
        return json_schema(self.result)

    def openai(self) -> dict[str, Any]:
        """The tool as OpenAI's chat completions API takes it in `tools`."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": self.input_schema()}}  # fmt: skip

    def anthropic(self) -> dict[str, Any]:
        """The tool as Anthropic's messages API takes it in `tools`."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema()}  # fmt: skip


def tool(hints: Hints, **described: str | Bounded) -> Callable[[F], F]:
    """Mark a method as a tool with its hints and a description of each parameter."""

    def mark(method: F) -> F:
        method.__tool__ = (hints, described)  # type: ignore[attr-defined]
        return method

    return mark


def spec_of(method: Callable[..., Any], name: str | None = None) -> ToolSpec:
    """The ToolSpec of a `@tool` method (bound or not)."""
    hints, described = method.__tool__  # type: ignore[attr-defined]
    name = name or method.__name__
    types_of = typing.get_type_hints(method)
    signature = inspect.signature(method)
    params, host = [], []
    for p in signature.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY:
            host.append(p.name)
            continue
        if p.name not in described:
            raise TypeError(f"tool {name}: parameter {p.name!r} has no description")
        given = described[p.name]
        if not isinstance(given, Bounded):
            given = Bounded(given, {})
        params.append(Param(p.name, types_of[p.name], given.description, p.default,
                            tuple(given.bounds.items())))  # fmt: skip
    unknown = set(described) - {p.name for p in params}
    if unknown:
        raise TypeError(f"tool {name}: describes no such parameter {sorted(unknown)}")
    description = inspect.cleandoc(method.__doc__ or "")
    if not description:
        raise TypeError(f"tool {name}: no description (docstring)")
    spec = ToolSpec(name, " ".join(description.split()), tuple(params), hints,
                    types_of.get("return"), tuple(host))  # fmt: skip
    try:
        spec.output_schema()  # every field described, every type one a schema says
    except TypeError as error:
        raise TypeError(f"tool {name}: its result: {error}") from None
    return spec


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON schema of the few types tool parameters and results use."""
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in simple:
        return {"type": simple[annotation]}
    if is_typeddict(annotation):
        return object_schema(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return json_schema(args[0])
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return {"anyOf": [json_schema(inner), {"type": "null"}]}
    if origin is list:
        return {"type": "array", "items": json_schema(args[0])}
    if origin is typing.Literal:
        return {"enum": list(args)}
    raise TypeError(f"no JSON schema for type {annotation!r}")


def object_schema(typed: Any) -> dict[str, Any]:
    """A TypedDict's JSON schema: its name, each field with its `Doc` description."""
    fields = typing.get_type_hints(typed, include_extras=True)
    properties = {}
    for name, annotation in fields.items():
        said = doc(annotation)
        if said is None:
            raise TypeError(f"field {typed.__name__}.{name} has no description "
                            "(Annotated[type, Doc('...')])")  # fmt: skip
        properties[name] = {**json_schema(annotation), "description": said}
    required = [name for name in fields if name in typed.__required_keys__]
    # The title names the shape: clients that make types of schemas (FastMCP's) name them so.
    return {"type": "object", "title": typed.__name__, "properties": properties,
            "required": required}  # fmt: skip


def doc(annotation: Any) -> str | None:
    """The description an `Annotated[type, Doc("...")]` carries, or None."""
    if typing.get_origin(annotation) is not Annotated:
        return None
    found = [m.documentation for m in annotation.__metadata__ if isinstance(m, Doc)]
    return found[0] if found else None
