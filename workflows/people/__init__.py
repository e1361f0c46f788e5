"""The people layer (DESIGN 4.3): escalation, delegation, inbox views, notifications."""
