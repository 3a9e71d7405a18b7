"""Fixtures for providers' own tests: ``nnrp_client``, ``nnrp_manifest``, ``nnrp_capabilities``,
``nnrp_recipe_runner`` (all session scoped, one connection per process / xdist worker).

Provider test suites need no async plugin: ``nnrp_client`` is a :class:`SyncClient`, a
blocking face of the async :class:`~nnrp_conformance.client.NnrpClient` that runs each call
in the suite's long-lived anyio portal. Every coroutine method of the client is available
with the same name and arguments and returns its result (``nnrp_client.capabilities()``);
what it returns is wrapped the same way when it has an async API, so
``op = nnrp_client.submit(envelope)`` gives an operation whose ``list(op)`` is its events and
``op.result()`` its terminal. ``nnrp_client.run(fn, *args)`` runs
``await fn(async_client, *args)`` for anything else, and ``nnrp_client.aio`` is the async
client itself (use it only inside the portal, e.g. via ``run``).

Without ``--nnrp-target`` these fixtures skip the test that asks for them, with the reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import Recipe, RecipeError, RecipeProblem, recipe_level
from nnrp_conformance.session import ConformanceCore, SetupError, default_model

__all__ = [
    "RecipeRunner",
    "SyncClient",
    "SyncProxy",
    "core_of",
    "nnrp_capabilities",
    "nnrp_client",
    "nnrp_manifest",
    "nnrp_recipe_runner",
]

CORE_KEY = pytest.StashKey[ConformanceCore]()


def core_of(config: pytest.Config) -> ConformanceCore:
    """The run core of this process, or skip: the fixtures need a configured target."""
    core = config.stash.get(CORE_KEY, None)
    if core is None:
        pytest.skip("needs an NNRP target: pass --nnrp-target HOST:PORT and --manifest PATH "
                    "(or set the nnrp_target / nnrp_manifest ini keys)")
    return core


def _setup(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except SetupError as exc:
        pytest.fail(str(exc), pytrace=False)


def _has_async_api(obj: Any) -> bool:
    """Objects the client hands back that need the portal too (e.g. a submitted operation)."""
    if obj is None or isinstance(obj, str | bytes | int | float | bool | dict | list | tuple):
        return False
    cls = type(obj)
    if hasattr(cls, "__aiter__"):
        return True
    return any(
        inspect.iscoroutinefunction(getattr(cls, name, None))
        for name in dir(cls) if not name.startswith("_")
    )


class SyncProxy:
    """Blocking face of an async object: coroutine methods block and return their result,
    async generator methods and ``async for`` iteration return/yield everything in a list,
    and returned objects with an async API are wrapped the same way."""

    def __init__(self, core: ConformanceCore, target: Callable[[], Any]) -> None:
        self._core = core
        self._target = target

    @property
    def aio(self) -> Any:
        """The wrapped async object itself (use it inside the portal, e.g. via ``run``)."""
        return self._target()

    @property
    def portal(self) -> Any:
        return self._core.portal

    def _wrap(self, value: Any) -> Any:
        if _has_async_api(value):
            return SyncProxy(self._core, lambda: value)
        return value

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``await fn(wrapped, *args, **kwargs)`` in the portal; returns its result."""
        return self._core.call(fn, self.aio, *args, **kwargs)

    def __iter__(self) -> Any:
        obj = self.aio
        if not hasattr(obj, "__aiter__"):
            raise TypeError(f"{type(obj).__name__} is not iterable")

        async def drain() -> list[Any]:
            return [item async for item in obj]

        return iter(self._core.call(drain))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if inspect.iscoroutinefunction(attr):
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._wrap(self._core.call(attr, *args, **kwargs))

            call.__name__ = name
            call.__doc__ = attr.__doc__
            return call
        if inspect.isasyncgenfunction(attr):
            async def drain(*args: Any, **kwargs: Any) -> list[Any]:
                return [item async for item in attr(*args, **kwargs)]

            def collect(*args: Any, **kwargs: Any) -> list[Any]:
                items: list[Any] = self._core.call(drain, *args, **kwargs)
                return items

            collect.__name__ = name
            collect.__doc__ = attr.__doc__
            return collect
        return attr

    def __repr__(self) -> str:
        return f"<SyncProxy of {self.aio!r}>"


class SyncClient(SyncProxy):
    """Blocking face of the suite's async client (see the module docstring)::

        op = nnrp_client.submit({"schema_version": ..., "operation": ..., "body": {...}})
        events = list(op)          # every event, until the terminal
        terminal = op.result()     # the Terminal
    """

    def __init__(self, core: ConformanceCore) -> None:
        super().__init__(core, lambda: core.client)

    def __repr__(self) -> str:
        return f"<SyncClient target={self._core.options.target!r}>"


class RecipeRunner:
    """``runner(recipe, *, timeout=None, params=None, model=None) -> CaseResult``.

    ``recipe`` is a recipe id (from the loaded recipes), a :class:`~nnrp_conformance.recipes.Recipe`
    or a recipe document (dict, validated like a file). The recipe is planned against the
    manifest with the run's model and parameters (``params`` adds to ``--nnrp-param``) and run
    even when the manifest does not claim it: the caller asked for it explicitly.
    """

    def __init__(self, core: ConformanceCore) -> None:
        self._core = core

    def _recipe(self, recipe: Any) -> Any:
        if isinstance(recipe, Recipe):
            return recipe
        if isinstance(recipe, str):
            recipes = self._core.recipes if self._core.recipes is not None else (
                self._core.load_recipes())
            for r in recipes:
                if r.id == recipe:
                    return r
            known = ", ".join(sorted(r.id for r in recipes))
            raise LookupError(f"no recipe with id {recipe!r}; loaded recipes: {known}")
        if isinstance(recipe, Mapping):
            data = dict(recipe)
            violations = validation.validate("recipe", data)
            if violations:
                where = Path("<recipe dict>")
                raise RecipeError([RecipeProblem(where, v.pointer, f"{v.message} [{v.rule}]")
                                   for v in violations])
            return Recipe(
                id=data["id"],
                path=Path("<recipe dict>"),
                data=data,
                status=data.get("status", contract.STATUS_MANDATORY),
                operation=data["operation"],
                required_capabilities=tuple(data.get("required_capabilities") or ()),
                level=recipe_level(data),
                rule=data.get("rule"),
                description=data.get("description"),
            )
        raise TypeError(f"expected a recipe id, Recipe or dict, got {type(recipe).__name__}")

    def plan_case(self, recipe: Any, *, params: Mapping[str, str] | None = None,
                  model: str | None = None) -> Any:
        core = self._core
        if core.manifest is None:
            core.load_manifest()
        if core.capabilities is None:
            core.fetch_capabilities()
        model_id = model or core.options.model
        if model_id is None:
            model_id = default_model(core.capabilities)
        plan = build_plan(
            [self._recipe(recipe)],
            core.manifest,
            model_id=model_id,
            params={**core.options.params, **(params or {})},
            extensions=tuple(core.options.extensions),
        )
        return plan.cases[0]

    def __call__(self, recipe: Any, *, timeout: float | None = None,
                 params: Mapping[str, str] | None = None, model: str | None = None) -> Any:
        case = self.plan_case(recipe, params=params, model=model)
        return self._core.run_case(case, timeout=timeout, force=True)


@pytest.fixture(scope="session")
def nnrp_manifest(pytestconfig: pytest.Config) -> Any:
    """The adapter capability manifest given with ``--manifest`` (a ``Manifest``)."""
    core = core_of(pytestconfig)
    return core.manifest if core.manifest is not None else _setup(core.load_manifest)


@pytest.fixture(scope="session")
def nnrp_capabilities(pytestconfig: pytest.Config) -> dict[str, Any]:
    """The endpoint's capability document, as fetched over NNRP."""
    core = core_of(pytestconfig)
    return core.capabilities if core.capabilities is not None else _setup(core.fetch_capabilities)


@pytest.fixture(scope="session")
def nnrp_client(pytestconfig: pytest.Config) -> SyncClient:
    """A connected client (one per process/worker), synchronous: see :class:`SyncClient`."""
    core = core_of(pytestconfig)
    _setup(lambda: core.client)
    return SyncClient(core)


@pytest.fixture(scope="session")
def nnrp_recipe_runner(pytestconfig: pytest.Config) -> RecipeRunner:
    """Run a recipe (id, Recipe or dict) against the target; returns a ``CaseResult``."""
    core = core_of(pytestconfig)
    _setup(lambda: core.client)
    return RecipeRunner(core)
