"""Recipe loading: find recipe files, parse JSON or YAML, validate them, return :class:`Recipe`.

Owns: where the bundled recipes live (wheel package data or the repository's ``recipes/``),
reading one or many recipe files, reporting *every* problem as ``<file>: <pointer>: <message>``
(parse errors with their line, schema violations with the field), and refusing duplicate ids.
It does not substitute parameters or select cases; that is :mod:`nnrp_conformance.planner`.

A recipe's ``level`` is its explicit ``level`` field, else the lowest ``api.level<N>`` it
requires (upstream's unsupported-operation recipe targets ``responses.create`` but requires
``api.level1``: it is a Level 1 case), else the level of its operation
(``contract.OPERATION_LEVELS``), else Level 1 (the discovery operation and operations outside
the profile are Level 1 concerns).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from nnrp_conformance import authority, contract, rules, validation
from nnrp_conformance.documents import DocumentSyntaxError, parse_document

__all__ = [
    "LEAD_OPERATION",
    "RECIPE_SUFFIXES",
    "SESSION_ANOTHER",
    "SESSION_SAME",
    "Recipe",
    "RecipeError",
    "RecipeProblem",
    "bundled_recipes_dir",
    "field_alternatives",
    "load_recipe_file",
    "load_recipes",
    "recipe_level",
]

RECIPE_SUFFIXES = (".json", ".yaml", ".yml")
#: the name of a concurrency recipe's own ``request`` among its operations (``concurrent``)
LEAD_OPERATION = "lead"
#: where a concurrency recipe's operation is submitted (``concurrent[].session``): on the
#: session of the recipe's own request, or on a second one opened for the group
SESSION_SAME, SESSION_ANOTHER = "same", "another"


@dataclass(frozen=True)
class Recipe:
    """One validated recipe, as read (``data`` is the parsed document, unsubstituted)."""

    id: str
    path: Path
    data: dict[str, Any] = field(repr=False, hash=False, compare=False)
    status: str
    operation: str
    required_capabilities: tuple[str, ...]
    level: int
    rule: str | None = None
    description: str | None = None

    @property
    def parameters(self) -> dict[str, str]:
        return dict(self.data.get("parameters") or {})

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(self.data.get("checks") or ())

    @property
    def beyond_profile(self) -> dict[str, str] | None:
        """What the recipe expects beyond the profile (rule, reading), or None."""
        return self.data.get("beyond_profile")

    @property
    def timeout_ms(self) -> int | None:
        return self.data.get("timeout_ms")

    @property
    def is_ours(self) -> bool:
        """Whether this project wrote the recipe (a bundled one outside ``upstream/``): ours
        never fix more than the profile's normative text; upstream's (and a provider's own)
        may, and what they fix beyond it is judged as theirs (rules.TAG_UPSTREAM)."""
        return _bundled_place(self.path) == "ours"

    @property
    def concurrent(self) -> list[dict[str, Any]]:
        """The operations submitted together with ``request`` (a concurrency recipe), or []."""
        return list(self.data.get("concurrent") or ())


@dataclass(frozen=True)
class RecipeProblem:
    path: Path
    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.pointer or '/'}: {self.message}"


class RecipeError(Exception):
    """Recipes that cannot be used. ``path``/``pointer``/``message`` describe the first problem;
    ``problems`` lists all of them (``str()`` prints one line per problem)."""

    def __init__(self, problems: Sequence[RecipeProblem]) -> None:
        if not problems:
            raise ValueError("RecipeError needs at least one problem")
        self.problems = tuple(problems)
        first = self.problems[0]
        self.path, self.pointer, self.message = first.path, first.pointer, first.message
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, path: Path | str, pointer: str, message: str) -> RecipeError:
        return cls([RecipeProblem(Path(path), pointer, message)])


def bundled_recipes_dir() -> Path:
    """The recipes shipped with the suite.

    From a wheel they are package data (``nnrp_conformance/recipes``); in an editable install
    the package directory has none, so the repository-root ``recipes/`` is used.
    """
    try:
        packaged = resources.files("nnrp_conformance").joinpath("recipes")
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, NotADirectoryError):  # pragma: no cover - defensive
        pass
    return Path(__file__).resolve().parents[2] / "recipes"


def _bundled_place(path: Path) -> str | None:
    """``"ours"`` or ``"upstream"`` for a bundled recipe file, else None."""
    root = bundled_recipes_dir().resolve()
    where = path.resolve()
    if not where.is_relative_to(root):
        return None
    return "upstream" if where.is_relative_to(root / "upstream") else "ours"


def field_alternatives(entry: Mapping[str, Any]) -> list[Any] | None:
    """The field subsets one ``expect.events`` entry accepts, any one of which an event must
    contain: its ``fields_any_of`` list, else its one ``fields`` object, else None (any event
    of its type). Every reader of an expectation's fields goes through here, so an
    alternative is never seen by one check and missed by another."""
    if "fields_any_of" in entry:
        return list(entry["fields_any_of"])
    return [entry["fields"]] if "fields" in entry else None


def recipe_level(data: dict[str, Any]) -> int:
    """Explicit ``level``, else the lowest ``api.level<N>`` the recipe requires, else its
    operation's level, else Level 1."""
    level = data.get("level")
    if isinstance(level, int) and not isinstance(level, bool):
        return level
    required = [contract.level_capability(lv) for lv in contract.LEVELS]
    for lv, token in zip(contract.LEVELS, required, strict=True):
        if token in (data.get("required_capabilities") or ()):
            return lv
    return contract.OPERATION_LEVELS.get(str(data.get("operation")), contract.LEVEL_CHAT)


def _parse(path: Path) -> tuple[Any, list[RecipeProblem]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, [RecipeProblem(path, "", f"cannot read file: {exc.strerror or exc}")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [RecipeProblem(path, "", f"not UTF-8 text (byte offset {exc.start})")]
    try:
        # a recipe is YAML unless it is named .json
        return parse_document(text, yaml_syntax=path.suffix.lower() != ".json"), []
    except DocumentSyntaxError as exc:
        return None, [RecipeProblem(path, "", str(exc))]


def _schema_problems(path: Path, data: Any) -> list[RecipeProblem]:
    return [
        RecipeProblem(path, v.pointer, f"{v.message} [{v.rule}]")
        for v in validation.validate("recipe", data)
    ]


def _semantic_problems(path: Path, data: dict[str, Any]) -> list[RecipeProblem]:
    """Rules a JSON Schema cannot state: counts that contradict each other."""
    problems: list[RecipeProblem] = []
    for i, entry in enumerate(data.get("expect", {}).get("events", [])):
        lo, hi = entry.get("min_count"), entry.get("max_count")
        if isinstance(lo, int) and isinstance(hi, int) and hi < lo:
            problems.append(RecipeProblem(
                path, f"/expect/events/{i}/max_count",
                f"max_count {hi} is smaller than min_count {lo}"))
    beyond = data.get("beyond_profile")
    if isinstance(beyond, dict) and isinstance(beyond.get("rule"), str):
        # only a recommendation can soften a miss: a recipe cannot make a rule of its own
        rule_id = beyond["rule"]
        rule = rules.lookup(rule_id)
        if rule is None or rule.tag != rules.TAG_RECOMMENDATION or rule.id != rule_id:
            problems.append(RecipeProblem(
                path, "/beyond_profile/rule", f"{rule_id!r} is not a recommendation rule of "
                f"the rulebook (docs/reference/rules.md)"))
    request = data.get("request", {})
    if "raw" in request and "envelope" in request:
        problems.append(RecipeProblem(
            path, "/request/raw", "request.raw replaces the envelope; do not combine it with "
            "request.envelope"))
    names: set[str] = set()
    for i, entry in enumerate(data.get("concurrent") or ()):
        where = f"/concurrent/{i}"
        if entry["name"] in names or entry["name"] == LEAD_OPERATION:
            problems.append(RecipeProblem(
                path, f"{where}/name", f"operation name {entry['name']!r} is used twice "
                f"({LEAD_OPERATION!r} names the recipe's own request)"))
        names.add(entry["name"])
        # each operation is an ordinary request with its expectations: the same rules
        problems.extend(RecipeProblem(path, where + p.pointer, p.message) for p in
                        _semantic_problems(path, {"request": entry["request"],
                                                  "expect": entry["expect"]}))
    return problems


def load_recipe_file(path: Path | str) -> Recipe:
    """Parse and validate one recipe file; raises :class:`RecipeError` listing every problem."""
    path = Path(path)
    data, problems = _parse(path)
    if not problems:
        if not isinstance(data, dict):
            kind = "empty" if data is None else type(data).__name__
            problems = [RecipeProblem(path, "", f"a recipe must be a mapping/object, got {kind}")]
        else:
            place = _bundled_place(path)
            if place == "upstream":  # upstream's bytes; the profile's authorities from outside
                data, issues = authority.with_upstream_authority(data)
                problems = [RecipeProblem(path, "/expect/events", m) for m in issues]
            problems = problems or _schema_problems(path, data) \
                or _semantic_problems(path, data) or [
                    RecipeProblem(path, pointer, message) for pointer, message
                    in authority.problems(data, ours=place == "ours")]
    if problems:
        raise RecipeError(problems)
    return Recipe(
        id=data["id"],
        path=path,
        data=data,
        status=data.get("status", contract.STATUS_MANDATORY),
        operation=data["operation"],
        required_capabilities=tuple(data.get("required_capabilities") or ()),
        level=recipe_level(data),
        rule=data.get("rule"),
        description=data.get("description"),
    )


def _expand(paths: Iterable[Path | str]) -> tuple[list[Path], list[RecipeProblem]]:
    files: list[Path] = []
    problems: list[RecipeProblem] = []
    for entry in paths:
        p = Path(entry)
        if p.is_dir():
            found = sorted(
                f for f in p.rglob("*")
                if f.is_file() and f.suffix.lower() in RECIPE_SUFFIXES
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            if not found:
                problems.append(RecipeProblem(p, "", "directory contains no recipe files "
                                              "(*.json, *.yaml, *.yml)"))
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            problems.append(RecipeProblem(p, "", "no such file or directory"))
    return files, problems


def load_recipes(paths: Sequence[Path | str] | None = None) -> list[Recipe]:
    """Load recipes from files and directories (recursively ``*.json``/``*.yaml``/``*.yml``).

    ``None`` loads the bundled recipes. Every file is checked before anything is raised, so
    one :class:`RecipeError` reports all problems of all files, and duplicate ids name both
    files. The order is the order of ``paths``, each directory sorted by file path.
    """
    files, problems = _expand([bundled_recipes_dir()] if paths is None else paths)
    recipes: list[Recipe] = []
    seen: dict[str, Path] = {}
    seen_files: set[Path] = set()
    for f in files:
        key = f.resolve()
        if key in seen_files:
            continue  # a file named twice (directly and via its directory) is loaded once
        seen_files.add(key)
        try:
            recipe = load_recipe_file(f)
        except RecipeError as exc:
            problems.extend(exc.problems)
            continue
        if recipe.id in seen:
            problems.append(RecipeProblem(
                f, "/id", f"duplicate recipe id {recipe.id!r} (also defined in {seen[recipe.id]})"))
            continue
        seen[recipe.id] = f
        recipes.append(recipe)
    if problems:
        raise RecipeError(problems)
    return recipes
