"""A tiny name -> factory registry (the timm / fvcore pattern).

Built-in entries are registered by explicit imports in each package's
__init__, never by scanning directories, so what is registered is visible in
the code; plugins (bench.core.plugins) register through the same decorators.
"""
from __future__ import annotations

import difflib
from typing import Callable, Dict, Iterator, Tuple

from bench.core import plugins
from bench.core.errors import BenchError, choices_error


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: Dict[str, Tuple[Callable, str]] = {}
        self._resolvers: list[Callable[[str], Tuple[Callable, dict] | None]] = []
        self._display: Dict[str, str] = {}  # name -> how reports print it, where declared
        # ((library, its name prefixes), its model names or None): a resolver's
        # names too many to list (timm's); an unknown name there is answered
        # with the closest names and the search to run
        self._libraries: list[tuple] = []

    def register(self, name: str, description: str = "", display_name: str = ""):
        """Decorator: register `fn` under `name`; a duplicate name is an error.
        `display_name`: how tables and figures print it (a backbone's
        "ResNet50"; a method declares its own on its class instead)."""

        def deco(fn):
            # a function without a docstring is described by nothing ('')
            first = next(iter((fn.__doc__ or "").strip().splitlines()), "")
            self.add(name, fn, description or first, display_name)
            return fn

        return deco

    def add(self, name: str, fn: Callable, description: str, display_name: str = "") -> None:
        """A name already taken (by a built-in, a plugin, or a patterned name
        such as '8hml') is an error: a plugin never silently overrides one."""
        taken = self._entries.get(name, (None,))[0] or self._resolved(name)
        if taken is not None:
            raise BenchError(f"duplicate {self.kind} name '{name}': already registered "
                             f"({plugins.origin_text(taken)}); choose another name")
        self._entries[name] = (fn, description)
        if display_name:
            self._display[name] = display_name

    def display_name(self, name: str) -> str:
        """The display name `name` was registered with, '' where none was."""
        return self._display.get(name, "")

    def _resolved(self, name: str):
        for resolver in self._resolvers:
            hit = resolver(name)
            if hit is not None:
                return hit[0]
        return None

    def add_resolver(self, resolver: Callable[[str], Tuple[Callable, dict] | None],
                     library: tuple = (), models: Callable[[], list] | None = None) -> None:
        """Patterned names (e.g. '8hml') resolve to (factory, fixed kwargs).
        `library`: (its name, prefix, other prefixes): the resolver takes a
        library's models by name ('timm:NAME', 'timm/NAME'); `models` lists
        them (without the prefix), for the closest names to a misspelt one."""
        self._resolvers.append(resolver)
        if library:
            self._libraries.append((library, models))

    def unknown(self, name: str, listed) -> BenchError:
        """The error for an unknown `name`: for a library's prefix, that the
        prefix takes the library's names, the closest of them and the `bench
        list` search that finds its models; else the choices `listed`."""
        for (library, prefix, *more), models in self._libraries:
            given = next((p for p in (prefix, *more) if name.startswith(p)), None)
            if given is None:
                continue
            model = name[len(given):].partition(".")[0].strip()  # 'resnet18.a1_in1k': a tag
            known = list(models()) if models is not None else []
            takes = (f"{prefix}NAME takes any of the {len(known):,} models {library} lists"
                     if known else f"{prefix}NAME takes any {library} model")
            if not model:
                return BenchError(f"--{self.kind} '{name}' names no model; {takes} (list them: "
                                  f"bench list --{self.kind}s '{prefix}*')")
            near = difflib.get_close_matches(model, known, n=3, cutoff=0.6)
            closest = f"closest: {', '.join(prefix + n for n in near)}; " if near else ""
            return BenchError(f"--{self.kind} {name}: '{model}' is not a {library} model "
                              f"({takes}); {closest}search them with bench list "
                              f"--{self.kind}s '{prefix}*{model}*'")
        return choices_error(self.kind, name, listed)

    def resolve(self, name: str) -> Tuple[Callable, dict]:
        if name in self._entries:
            return self._entries[name][0], {}
        for resolver in self._resolvers:
            hit = resolver(name)
            if hit is not None:
                return hit
        raise self.unknown(name, self.names())

    def get(self, name: str) -> Callable:
        fn, kwargs = self.resolve(name)
        if kwargs:
            return lambda *a, **kw: fn(*a, **{**kwargs, **kw})
        return fn

    def __contains__(self, name: str) -> bool:
        try:
            self.resolve(name)
        except BenchError:
            return False
        return True

    def names(self) -> list[str]:
        return list(self._entries)

    def describe(self) -> Iterator[Tuple[str, str]]:
        for name, (_, desc) in self._entries.items():
            yield name, desc

    def origin(self, name: str) -> str:
        """'built-in' or the plugin that registered `name` (bench.core.plugins)."""
        return plugins.origin_text(self.resolve(name)[0])

    def code_identity(self, name: str, *more) -> dict:
        """Origin and source sha256 of the code behind `name` (and of `more`,
        e.g. the class a factory returns)."""
        return plugins.code_identity(self.resolve(name)[0], *more)


ALL = "all"


def _group_labels(aliases: dict, valid: list[str]) -> list[str]:
    """Each group's name, with its members where some are not listed on their
    own ('extra (mdca, ...)'): an error must name every method one can ask for."""
    return [f"{group} ({', '.join(names)})" if set(names) - set(valid) else group
            for group, names in aliases.items()]


def _unlisted(registry, valid: list[str], aliases: dict) -> list[str]:
    """Registered names in neither `valid` nor a group (the `mhml` family, asked
    for by name with --set heads=M): named too."""
    grouped = {n for names in aliases.values() for n in names}
    return [n for n in (registry.names() if registry is not None else [])
            if n not in valid and n not in grouped]


def expand_names(text: str, valid: list[str], kind: str, registry=None,
                 aliases: dict | None = None) -> list[str]:
    """'all' -> every valid name; 'a,b' -> [a, b] (order kept, duplicates dropped).

    `registry`, when given, also accepts patterned names it resolves (e.g. '8hml');
    `aliases` maps extra group names (e.g. 'paper') to lists of names."""
    aliases = {ALL: list(valid), **(aliases or {})}
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise BenchError(f"--{kind} is empty; give a name, a comma list or '{ALL}'")
    out: list[str] = []
    for item in items:
        names = aliases.get(item, [item])
        for name in names:
            known = name in valid or (registry is not None and name in registry)
            if not known:
                listed = list(valid) + _group_labels(aliases, valid) + _unlisted(
                    registry, valid, aliases)
                raise (registry.unknown(name, listed) if registry is not None
                       else choices_error(kind, name, listed))
            if name not in out:
                out.append(name)
    return out
