"""The ``lockstep`` command. Each subcommand lives in the package it belongs to."""
