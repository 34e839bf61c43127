"""Detection quality and post-mortems: a simulator frame turned into features as Prometheus would
give them (``emulate``, ``simframe``), the evaluation report (``evaluate``, ``truthcheck``,
``harness``), the scikit-learn alternatives ``make eval`` weighs (``models``), and the post-mortem of a
past window read from Prometheus (``postmortem``)."""
