"""URLs of the demo/dev project."""

from importlib.util import find_spec

from django.contrib import admin
from django.urls import include, path


def _module_exists(name: str) -> bool:
    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:
        return False


urlpatterns = [
    path("admin/", admin.site.urls),
]

# The DRF API is optional: mounted only when DRF and the api package are both installed.
if _module_exists("rest_framework") and _module_exists("workflows.api.urls"):
    urlpatterns.append(path("api/", include("workflows.api.urls")))
