"""Every public class documents every constructor parameter of its own, and every public
function of the packages' top level every parameter it takes.

A field (pydantic or dataclass) is documented by its attribute docstring, its pydantic
``description``, or the class docstring naming it in backquotes; a parameter of a
plain ``__init__`` by the class or ``__init__`` docstring naming it in backquotes or
in an ``Args:`` entry (``name: what it is``).
Parameters the framework's base class defines (``callback_manager``, ``tags``, ...)
are the framework's to document.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
import re
import textwrap
from typing import Any

import pytest
from pydantic import BaseModel

PACKAGES = ("thresholded", "llama_index_thresholded", "langchain_thresholded")
OURS = ("thresholded", "llama_index_thresholded", "langchain_thresholded")
# Public outside __all__: the embeddings of the packaged models, built by users.
MODULES = ("llama_index_thresholded.embeddings", "langchain_thresholded.embeddings")


def exported(wanted: Any) -> dict[Any, str]:
    """The values of the packages' top-level ``__all__`` that are ``wanted``, by name."""
    found: dict[Any, str] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if wanted(value):
                found.setdefault(value, f"{package}.{name}")
    return found


def public_classes() -> list[tuple[str, type]]:
    found = exported(lambda v: inspect.isclass(v) and not issubclass(v, BaseException))
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module_name and name[0] != "_":
                found.setdefault(value, f"{module_name}.{name}")
    return sorted(((name, cls) for cls, name in found.items()), key=lambda x: x[0])


def _ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] in OURS or cls.__module__ == __name__


def own_parameters(cls: type) -> list[str]:
    """The constructor parameters this package's classes add (not their frameworks')."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    if issubclass(cls, BaseModel):
        names: list[str] = []
        for klass in cls.__mro__:
            if _ours(klass) and issubclass(klass, BaseModel):
                names += [n for n in klass.__annotations__ if n in cls.model_fields]
        return sorted(set(names))
    init = next((k.__dict__["__init__"] for k in cls.__mro__ if "__init__" in k.__dict__), None)
    if init is None or not _ours(_owner(cls, "__init__")):
        return []
    return [
        name
        for name, p in inspect.signature(init).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _owner(cls: type, attribute: str) -> type:
    return next(k for k in cls.__mro__ if attribute in k.__dict__)


def _docs(cls: type) -> str:
    texts = [inspect.getdoc(cls) or ""]
    init = cls.__dict__.get("__init__")
    if init is not None:
        texts.append(inspect.getdoc(init) or "")
    return "\n".join(texts)


def attribute_docstrings(cls: type) -> set[str]:
    """The attributes of this package's classes (``cls`` and its bases) that are followed by
    a docstring, as in ``name: int = 0`` then ``\"\"\"What it is.\"\"\"``."""
    documented: set[str] = set()
    for klass in cls.__mro__:
        if not _ours(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
        for statement, following in itertools.pairwise(body):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                documented.add(statement.target.id)
    return documented


def named_in(name: str, docs: str) -> bool:
    """Whether ``docs`` names ``name`` in backquotes (``name`` or ``name=...``) or in an
    ``Args:`` entry."""
    quoted = rf"``{re.escape(name)}(``|=)|`{re.escape(name)}`"
    return bool(re.search(rf"{quoted}|^\s*{re.escape(name)}( \([^)]*\))?: \S", docs, re.M))


def undocumented(cls: type) -> list[str]:
    docs = _docs(cls)
    by_attribute = attribute_docstrings(cls)
    missing = []
    for name in own_parameters(cls):
        field: Any = getattr(cls, "model_fields", {}).get(name)
        if name in by_attribute or (field is not None and (field.description or "").strip()):
            continue
        if not named_in(name, docs):
            missing.append(name)
    return missing


def public_functions() -> list[tuple[str, Any]]:
    """The functions in the ``__all__`` of the packages' top level."""
    found = exported(inspect.isfunction)
    return sorted(((name, f) for f, name in found.items()), key=lambda x: x[0])


FUNCTIONS = public_functions()


@pytest.mark.parametrize(("name", "function"), FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_every_parameter_of_a_public_function_is_documented(name: str, function: Any) -> None:
    docs = inspect.getdoc(function) or ""
    assert docs, f"{name} has no docstring"
    parameters = inspect.signature(function).parameters.values()
    missing = [
        p.name
        for p in parameters
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not named_in(p.name, docs)
    ]
    assert not missing, f"{name} does not document {missing}"


CLASSES = public_classes()


@pytest.mark.parametrize(("name", "cls"), CLASSES, ids=[n for n, _ in CLASSES])
def test_every_constructor_parameter_is_documented(name: str, cls: type) -> None:
    assert inspect.getdoc(cls), f"{name} has no docstring"
    missing = undocumented(cls)
    assert not missing, f"{name} does not document {missing}"


class _Plain:
    """Takes ``a``."""

    def __init__(self, a: int, b: int, c: int) -> None:
        """Args:
        c: An entry of its own.
        """


class _Model(BaseModel):
    """Takes ``c``."""

    c: int = 0
    d: int = 0
    e: int = 0
    """Documented by its attribute docstring."""


def test_the_check_reads_pydantic_fields_and_signatures() -> None:
    """The introspection itself: it finds undocumented names of both kinds."""
    assert undocumented(_Plain) == ["b"]
    assert undocumented(_Model) == ["d"]
