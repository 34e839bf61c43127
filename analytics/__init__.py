"""lockstep analytics."""
