"""The REST API (Django REST framework): start workflows, read the inbox, answer, decide.

Optional: this package is the only place that imports DRF, django-filter and
drf-spectacular. A project includes `workflows.api.urls` under a prefix of its choice and
adds `rest_framework`, `rest_framework.authtoken`, `django_filters` and `drf_spectacular`
(and `drf_spectacular_sidecar` for the bundled Swagger UI and Redoc) to INSTALLED_APPS.
"""
