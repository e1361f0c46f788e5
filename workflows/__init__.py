"""Human-in-the-loop workflows: the engine app."""
