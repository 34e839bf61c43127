"""lockstep power."""
