"""URLs of the approvals app outside admin: the e-mail links' confirmation page.
Mount them with `path("approvals/", include("approvals.urls"))`."""

from django.urls import path

from . import views

app_name = "approvals"

urlpatterns = [
    path("email/<str:token>/", views.email_decision, name="email-decision"),
]
