"""URLs of the test project: admin (monitor and inbox), the approvals pages and the API."""

from importlib.util import find_spec

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("approvals/", include("approvals.urls")),
]

# The API is the optional `api` extra: mounted when Django REST framework is installed.
if find_spec("rest_framework") is not None:
    urlpatterns.append(path("api/", include("workflows.api.urls")))
