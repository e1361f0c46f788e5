"""Workflow definitions by name and version, autodiscovered from installed apps.

`register(workflow, version=None)` (or `@register` on a factory) adds a definition; the
version defaults to a fingerprint of the graph, so it changes exactly when the graph does.
An invocation runs on the version it started with; when that version is gone, it runs on
the latest one if every stored node run still has its node, else it fails with
DefinitionChangedError.

The versions of one workflow come from one module; a name two modules register is a clash
(system check workflows.E002). An unknown name's error lists the registered ones.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.utils.module_loading import autodiscover_modules

from .engine.errors import DefinitionChangedError
from .engine.nodes import ParallelWorker
from .engine.workflow import Workflow

T = TypeVar("T", Workflow, Callable[[], Workflow])


class UnknownWorkflowError(LookupError):
    """No definition by that name (or version); the message lists what is registered."""

    code = "unknown_workflow"

    def __init__(self, name: str, version: str | None = None, registered: Iterable[str] = ()):
        self.name = name
        self.registered = sorted(registered)
        if version:
            message = f"no workflow named {name!r} version {version!r} is registered"
        else:
            message = f"no workflow named {name!r} is registered"
        if self.registered:
            closest = difflib.get_close_matches(name, self.registered, n=1)
            if closest and not version:
                message += f"; did you mean {closest[0]!r}?"
            message += f" Registered: {', '.join(self.registered)}."
        else:
            message += (
                ". No workflow is registered at all: register() them in a workflows.py module "
                'of an installed app, or list their modules in HITL["WORKFLOW_MODULES"].'
            )
        super().__init__(message)


@dataclass(frozen=True)
class Definition:
    name: str
    version: str
    workflow: Workflow


def describe(workflow: Workflow) -> dict[str, Any]:
    """The graph, nested workflows included: what the version fingerprint covers."""
    graph = workflow.graph()
    for entry in graph["nodes"]:
        child = workflow.nodes.get(entry["name"])
        if isinstance(child, Workflow):
            entry["graph"] = describe(child)
    return graph


def fingerprint(workflow: Workflow) -> str:
    encoded = json.dumps(describe(workflow), sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def runs_fit(workflow: Workflow, paths: Iterable[str]) -> bool:
    """Whether every stored node-run path names nodes this definition still has."""
    for path in paths:
        segments = [segment.partition("@")[0] for segment in path.split("/")]
        if segments[0] != workflow.name:
            return False
        scope: Any = workflow
        for name in segments[1:]:
            if isinstance(scope, ParallelWorker) and name == scope.name:
                break  # an item of a parallel worker
            if not isinstance(scope, Workflow):
                break  # dynamic children are not part of the static graph
            if name not in scope.nodes:
                return False
            scope = scope.nodes[name]
    return True


class WorkflowRegistry:
    def __init__(self) -> None:
        self._versions: dict[str, dict[str, Definition]] = {}
        self._latest: dict[str, Definition] = {}
        # The modules that registered each name: versions of one workflow come from one
        # module; a second module using the name is a clash (see workflows.checks).
        self._origins: dict[str, set[str]] = {}

    def register(self, workflow: T | None = None, *, version: str | None = None) -> Any:
        """Register a Workflow, or decorate a factory that returns one."""

        def add(target: T, origin: str) -> T:
            built = target if isinstance(target, Workflow) else target()
            if not isinstance(built, Workflow):
                raise TypeError(f"register() needs a Workflow or a factory of one, got {built!r}")
            definition = Definition(built.name, version or fingerprint(built), built)
            self._versions.setdefault(built.name, {})[definition.version] = definition
            self._latest[built.name] = definition
            self._origins.setdefault(built.name, set()).add(
                origin if isinstance(target, Workflow) else target.__module__
            )
            return target

        if workflow is not None:
            return add(workflow, _caller_module())
        return lambda target: add(target, _caller_module())

    def get(self, name: str, version: str | None = None) -> Definition:
        if version is None:
            if name not in self._latest:
                raise UnknownWorkflowError(name, registered=self._latest)
            return self._latest[name]
        try:
            return self._versions[name][version]
        except KeyError:
            raise UnknownWorkflowError(name, version, registered=self._latest) from None

    def for_invocation(
        self, name: str, version: str, paths: Callable[[], Iterable[str]]
    ) -> Workflow:
        """The definition an invocation continues on (see the module docstring)."""
        pinned = self._versions.get(name, {}).get(version)
        if pinned is not None:
            return pinned.workflow
        latest = self.get(name).workflow
        if not runs_fit(latest, paths()):
            raise DefinitionChangedError(
                f"workflow {name!r} version {version!r} is no longer registered and the "
                f"current version lacks nodes this invocation already ran"
            )
        return latest

    def definitions(self) -> list[Definition]:
        return sorted(self._latest.values(), key=lambda d: d.name)

    def clashes(self) -> dict[str, list[str]]:
        """Names that more than one module registered: {name: [modules]}."""
        return {
            name: sorted(modules) for name, modules in self._origins.items() if len(modules) > 1
        }

    def unregister(self, name: str) -> None:
        self._versions.pop(name, None)
        self._latest.pop(name, None)
        self._origins.pop(name, None)

    def autodiscover(self, extra_modules: Iterable[str] = ()) -> None:
        autodiscover_modules("workflows")
        for module in extra_modules:
            importlib.import_module(module)


def _caller_module() -> str:
    """The module that called register() (two frames up: past register and its helper)."""
    return sys._getframe(2).f_globals.get("__name__", "?")


registry = WorkflowRegistry()
register = registry.register
