"""Unknown keyword arguments are errors: a misspelt setting must not be ignored.

Pydantic models ignore unknown keywords (``extra="ignore"``, the default of LangChain
and LlamaIndex components) or report them as a ``ValidationError`` among the values.
:class:`StrictArguments` makes a model's constructor refuse them the way a Python
function does, with a ``TypeError`` that names them and lists what the class accepts,
before pydantic runs. :func:`check_arguments` does the same for a plain function that
has to take ``**kwargs``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from pydantic import AliasChoices, AliasPath

__all__ = [
    "StrictArguments",
    "check_arguments",
    "check_call_options",
    "check_switches",
    "named_parameters",
    "near_misses",
    "strict_constructor",
]

F = TypeVar("F", bound=Callable[..., Any])


def check_arguments(
    what: str,
    given: Iterable[str],
    accepted: Iterable[str],
    elsewhere: Mapping[str, str] | None = None,
) -> None:
    """Raise ``TypeError`` naming every keyword of ``given`` that is not ``accepted``.

    ``what`` names the callable in the message, e.g. ``"SimilarityThresholdCompressor()"``;
    ``elsewhere`` says, for a keyword another class takes instead, where to give it.
    """
    allowed = sorted(set(accepted))
    unknown = [name for name in given if name not in allowed]
    if not unknown:
        return
    hints = []
    policy_fields = _policy_fields() if "policy" in allowed else frozenset()
    for name in unknown:
        close = difflib.get_close_matches(name, allowed, n=1)
        if elsewhere and name in elsewhere:
            hints.append(f"{name!r} ({elsewhere[name]})")
        elif name in policy_fields:
            # a policy field is set in the policy: the nearest accepted name would mislead
            # (max_chars is not max_retries)
            field = _other_names().get(name, name)
            hints.append(
                f"{name!r} (a RetrievalPolicy field: pass policy=RetrievalPolicy({field}=...))"
            )
        elif close:
            hints.append(f"{name!r} (did you mean {close[0]!r}?)")
        else:
            hints.append(repr(name))
    plural = "s" if len(unknown) > 1 else ""
    raise TypeError(
        f"{what} got {'an ' if not plural else ''}unexpected keyword argument{plural} "
        f"{', '.join(hints)}; it accepts: {', '.join(allowed) or 'none'}"
    )


def refuse_unknown_fields(
    data: Any, fields: Iterable[str], unknown: Callable[[str], str] | None = None
) -> None:
    """Refuse the keys of a stored record (``data``, when it is a dict) that are not
    ``fields``, each said by ``unknown`` (default: :func:`unknown_field`)."""
    if not isinstance(data, dict):
        return
    known = list(fields)
    say = unknown or (lambda key: unknown_field(key, known))
    extra = [str(key) for key in data if key not in known]
    if extra:
        raise ValueError("; ".join(say(key) for key in extra))


def unknown_field(
    key: str, fields: Iterable[str], other_names: Mapping[str, str] | None = None
) -> str:
    """What to write instead of the unknown field ``key``: the field ``other_names`` gives
    for it (a framework's name), else the nearest spelling, else the fields."""
    known = list(fields)
    meant = (other_names or {}).get(key) or next(
        iter(difflib.get_close_matches(key, known, n=1)), None
    )
    if meant is None:
        return f"unknown field {key!r}; the fields are {', '.join(known)}"
    return f"unknown field {key!r}: write {meant}=..."


def _policy_fields() -> frozenset[str]:
    """The fields of :class:`~thresholded.policy.RetrievalPolicy`, and the frameworks' names
    for them (:data:`~thresholded.policy.OTHER_NAMES`)."""
    from thresholded.policy import RetrievalPolicy  # the policy module imports this one's users

    return frozenset(RetrievalPolicy.model_fields) | frozenset(_other_names())


def _other_names() -> dict[str, str]:
    from thresholded.policy import OTHER_NAMES

    return OTHER_NAMES


def check_call_options(
    what: str, options: Iterable[str], accepted: Iterable[str], *, top_k: str
) -> None:
    """Raise ``TypeError`` naming every option of one call that is not ``accepted``; the
    number of sections has a name in each framework (``top_k``, LangChain's ``k``), and
    the other one's is answered with this one's."""
    allowed = set(accepted)
    unknown = sorted(set(options) - allowed)
    if not unknown:
        return
    other = "top_k" if top_k == "k" else "k"
    hint = f" (use {top_k}: it is the number of sections here)" if other in unknown else ""
    raise TypeError(
        f"{what} got unexpected keyword argument(s) {unknown}{hint}; per call it accepts "
        f"{sorted(allowed)}"
    )


def strict_constructor(init: F) -> F:
    """An ``__init__`` with named parameters whose unknown keyword is refused as
    :func:`check_arguments` refuses it (the name meant, or the policy for a policy field, and
    what is accepted), not with Python's bare "unexpected keyword argument". Its signature
    stays the constructor's."""
    accepted = named_parameters(init)

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_arguments(f"{type(self).__name__}()", kwargs, accepted)
        return init(self, *args, **kwargs)

    return checked  # type: ignore[return-value]


def check_switches(**switches: Any) -> None:
    """Raise ``TypeError`` naming the first switch that is not a bool: a string such as
    ``"false"`` is truthy, and would turn on what it meant to turn off."""
    for name, value in switches.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")


def list_of_strings(value: Any, *, argument: str, what: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings, refusing anything else. A lone string is the usual
    slip: a restriction would read it as its characters, or as a substring test."""
    if isinstance(value, str):
        raise TypeError(
            f"{argument} takes a list of {what}, got the string {value!r}: write [{value!r}] "
            "for one"
        )
    if not isinstance(value, Sequence | set | frozenset):
        raise TypeError(f"{argument} takes a list of {what}, got {type(value).__name__} {value!r}")
    others = sorted({type(v).__name__ for v in value if not isinstance(v, str)})
    if others:
        raise TypeError(f"{argument} takes a list of {what} (strings), got values of type {others}")
    return tuple(value)


def search_ids(value: Any, *, argument: str) -> tuple[str, ...] | None:
    """A store's ``ids`` restriction as strings: one id as a string (as Chroma takes it), or
    a list of ids, strings or whole numbers (a Milvus INT64 key); None: none given. Anything
    else is refused: a lone number is not iterable, and a dict or bytes would be read as
    their keys or byte values, which name no section."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    what = f"{argument} takes a list of ids (or one id as a string)"
    if isinstance(value, bytes | bytearray) or not isinstance(value, Sequence | set | frozenset):
        hint = f": write [{value!r}] for one" if isinstance(value, int | float) else ""
        raise TypeError(f"{what}, got {type(value).__name__} {value!r}{hint}")
    others = sorted(
        {type(v).__name__ for v in value if isinstance(v, bool) or not isinstance(v, str | int)}
    )
    if others:
        raise TypeError(f"{what} (strings or whole numbers), got values of type {others}")
    return tuple(str(v) for v in value)


def unawaited(value: object) -> str:
    """What to add where a question (or another argument) is a coroutine or another
    awaitable: an ``async`` function called without ``await``."""
    if not inspect.isawaitable(value):
        return ""
    return ": await it first (an async function returns a coroutine, not its result)"


def near_misses(
    given: Iterable[str], known: Iterable[str], *, cutoff: float = 0.8
) -> list[tuple[str, str]]:
    """Each name of ``given`` that is not ``known`` but close to one (a typo, a plural), with
    the known name it is nearest: ``("filtr", "filter")``."""
    names = sorted(set(known))
    misses = []
    for name in given:
        close = [] if name in names else difflib.get_close_matches(name, names, 1, cutoff)
        if close:
            misses.append((name, close[0]))
    return misses


_FRAMEWORKS = (
    ("langchain", "LangChain", "langchain_thresholded"),
    ("llama_index", "LlamaIndex", "llama_index_thresholded"),
)


def of_another_framework(value: object, ours: str) -> str:
    """What to say of ``value`` where the adapter ``ours`` (its package name) got it: that it
    is the other framework's object (or the other adapter's), and which adapter takes it;
    ``""`` when it is not."""
    framework, adapter = _framework_of(value)
    if adapter is None or adapter == ours:
        return ""
    return f"{type(value).__name__} is a {framework} object: use {adapter}"


_MODELS = {
    "LangChain": ("embeddings", "Embeddings", "load_embeddings"),
    "LlamaIndex": ("embed_model", "BaseEmbedding", "load_embed_model"),
}
"""Each framework's model argument, the class its models are, and this package's loader."""


def not_a_model(value: object, framework: str) -> TypeError:
    """The error of ``value`` given as the ``framework``'s model, which it is not: the other
    framework's model is named as such, with the loader of this one's packaged models."""
    argument, kind, loader = _MODELS[framework]
    other = framework_of(value)
    whose = f", a {other} model" if other not in (None, framework) else ""
    return TypeError(
        f"{argument} must be a {framework} {kind}, got {type(value).__name__}{whose}: load the "
        f"{framework} one with {loader}(...) (the packaged models: 'minilm', 'use-multilingual')"
    )


def framework_of(value: object) -> str | None:
    """The framework (``"LangChain"``, ``"LlamaIndex"``) whose object ``value`` is, or whose
    objects a non-empty list or tuple of them holds; None: neither."""
    if isinstance(value, list | tuple) and value:
        value = value[0]
    return _framework_of(value)[0]


def _framework_of(value: object) -> tuple[str | None, str | None]:
    root = type(value).__module__.split(".")[0]
    for prefix, framework, adapter in _FRAMEWORKS:
        if root.startswith(prefix):
            return framework, adapter
    return None, None


def named_parameters(function: Callable[..., Any]) -> list[str]:
    """The names a function takes as keywords, without ``self``, ``cls``, ``*args``, ``**kw``."""
    return [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in ("self", "cls")
    ]


class StrictArguments:
    """Mixin for pydantic models: an unknown keyword argument is a ``TypeError`` naming it.

    Put it first among the bases: ``class Compressor(StrictArguments,
    BaseDocumentCompressor)``. A model accepts its fields, by name or by alias as
    pydantic would, and the names in ``_init_keywords``: keywords its own
    ``__init__`` consumes that are not fields. Everything else is refused before pydantic runs.
    """

    _init_keywords: ClassVar[tuple[str, ...]] = ()
    """Keywords the constructor takes besides the fields (its ``__init__`` consumes them)."""
    _given_elsewhere: ClassVar[dict[str, str]] = {}
    """Keywords another class takes instead, each with where to give it."""

    def __init__(self, /, *args: Any, **data: Any) -> None:
        self._check_keywords(data)
        super().__init__(*args, **data)

    @classmethod
    def _check_keywords(cls, data: Iterable[str]) -> None:
        """Refuse the keywords of ``data`` this class does not take; a subclass whose own
        ``__init__`` consumes some calls it first, so that a typo is reported first."""
        check_arguments(f"{cls.__name__}()", data, accepted_keywords(cls), cls._given_elsewhere)


def accepted_keywords(model: type[Any]) -> set[str]:
    """The keywords a pydantic model's constructor takes: its fields' names and aliases."""
    config = getattr(model, "model_config", {})
    by_name = bool(config.get("populate_by_name") or config.get("validate_by_name"))
    by_alias = config.get("validate_by_alias", True)
    accepted = set(getattr(model, "_init_keywords", ()))
    for name, field in getattr(model, "model_fields", {}).items():
        aliases = _alias_names(field.validation_alias or field.alias)
        if by_name or not aliases:
            accepted.add(name)
        if by_alias:
            accepted.update(aliases)
    return accepted


def _alias_names(alias: str | AliasPath | AliasChoices | None) -> set[str]:
    if alias is None:
        return set()
    if isinstance(alias, str):
        return {alias}
    if isinstance(alias, AliasPath):
        first = alias.path[0] if alias.path else None
        return {first} if isinstance(first, str) else set()
    names: set[str] = set()
    for choice in alias.choices:
        names |= _alias_names(choice)
    return names
