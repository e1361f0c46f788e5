"""Human-in-the-loop workflows: the engine app."""

_DISTRIBUTION = "django-hitl-workflows"

__version__: str  # the installed distribution's version, read on first use


def __getattr__(name: str) -> str:
    # Importing importlib.metadata costs tens of milliseconds: the engine, which imports
    # this package, does not pay it unless the version is asked for.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version(_DISTRIBUTION)
        except PackageNotFoundError:  # a checkout on sys.path, not installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
