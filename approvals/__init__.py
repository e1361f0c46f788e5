"""Staff decisions on workflow interrupts: Decision model and admin inbox."""
