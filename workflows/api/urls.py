"""URLs of the API; a project mounts them under a prefix of its choice (`api/` in the demo).

Swagger UI and Redoc load their assets from drf-spectacular-sidecar (static files, no CDN).
"""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from ..protocols.stream_asgi import pooled_view
from .agui import AguiRunView
from .delegations import DelegationViewSet
from .grants import GrantViewSet
from .stream import InvocationStreamView
from .tokens import ObtainTokenView
from .views import (
    FunctionResponseViewSet,
    InterruptViewSet,
    InvocationViewSet,
)
from .workflows import WorkflowViewSet

app_name = "workflows-api"

router = SimpleRouter()
router.register("workflows", WorkflowViewSet, basename="workflow")
router.register("invocations", InvocationViewSet, basename="invocation")
router.register("interrupts", InterruptViewSet, basename="interrupt")
router.register("function-responses", FunctionResponseViewSet, basename="function-response")
router.register("grants", GrantViewSet, basename="grant")
router.register("delegations", DelegationViewSet, basename="delegation")

urlpatterns = [
    path(
        "invocations/<str:pk>/stream/",
        pooled_view(InvocationStreamView.as_view()),
        name="invocation-stream",
    ),
    path("agui/<str:workflow>/", pooled_view(AguiRunView.as_view()), name="agui-run"),
    *router.urls,
    path("token/", ObtainTokenView.as_view(), name="token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "schema/swagger-ui/",
        SpectacularSwaggerView.as_view(url_name="workflows-api:schema"),
        name="swagger-ui",
    ),
    path(
        "schema/redoc/", SpectacularRedocView.as_view(url_name="workflows-api:schema"), name="redoc"
    ),
]
