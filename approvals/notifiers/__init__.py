"""The built-in notifiers HITL["NOTIFIERS"] may name: `email.EmailNotifier` (the default)
and `slack.SlackNotifier`. See workflows/notifications.py for the interface."""
