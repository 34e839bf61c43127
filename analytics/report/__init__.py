"""lockstep report."""
