"""The job's own pace as its ranks report it: step ends sent by each training process (``lockstep.training``, the
feed of ``stepfeed``) and served by the node agent's ``steps`` collector.

Per rank on the scraped node (``node`` comes from the scrape target, as for every node agent series): ``job_id``
is the job holding the rank's GPU in the node's job mapping (a Kubernetes job's ``namespace/name`` too), else the
job the process named (``SLURM_JOB_ID``, ``LOCKSTEP_JOB_ID``); ``rank`` the rank it named (``RANK``,
``SLURM_PROCID``); ``gpu`` the GPU's index (the GPU collector's label), "" where it could not be placed.

``increase(lockstep_rank_step_seconds_total[w]) / increase(lockstep_rank_steps_total[w])`` is the rank's mean step
wall time over ``w``: end to end, waiting for peers included, so the ranks of a synchronous job show one pace (the
job's); ``time() - lockstep_rank_step_end_timestamp_seconds`` is how long the rank has been in its current step.
``lockstep_rank_step_seconds`` (catalog ``analytics``) is a different quantity: the rank's own compute and
collective time per step, without waiting, which only the job itself can measure.
"""
from lockstep.exporters.catalog.model import counter, gauge

# What became of a datagram on the steps socket (lockstep_steps_datagrams_total).
DATAGRAM_RESULTS = ("accepted", "malformed", "refused")

RANK = ("job_id", "rank", "gpu")

RANK_STEPS = counter(
    "lockstep_rank_steps_total",
    "Steps the rank has ended (step_end() calls), as its process reported them; summed over the processes that "
    "held the rank (a restarted rank continues the count).", RANK)
RANK_STEP_SECONDS_TOTAL = counter(
    "lockstep_rank_step_seconds_total",
    "Sum of the wall times between the rank's consecutive step ends (a process's first step end adds none): with "
    "lockstep_rank_steps_total, the rank's mean step time over any window.", RANK, "seconds")
RANK_STEP_END = gauge(
    "lockstep_rank_step_end_timestamp_seconds",
    "Unix time of the rank's last step end. time() minus it grows while the rank is stuck in a step (a hang), or "
    "since its process stopped reporting; the series goes after --steps.ttl without a report.", RANK, "seconds")
RANK_LAST_STEP = gauge(
    "lockstep_rank_last_step",
    "The step number the rank gave with its last step end (absent where the job gives none): a rank behind its "
    "peers' numbers is behind in the job.", RANK)

STEPS_SENDERS = gauge(
    "lockstep_steps_senders",
    "Training processes whose reports the agent holds (one per process; gone after --steps.ttl without a report).")
STEPS_SENDERS_LIMIT = gauge(
    "lockstep_steps_senders_limit",
    "At most this many processes are held (--steps.max-senders); reports of more are refused.")
STEPS_DATAGRAMS = counter(
    "lockstep_steps_datagrams_total",
    f"Datagrams received on the steps socket by result: {', '.join(DATAGRAM_RESULTS)} (malformed: not a report of "
    "lockstep.exporters.catalog.stepfeed's format; refused: a new process over --steps.max-senders). Reports a "
    "training process could not send (no agent, a full socket buffer) are counted in that process only.",
    ("result",))

METRICS = (RANK_STEPS, RANK_STEP_SECONDS_TOTAL, RANK_STEP_END, RANK_LAST_STEP, STEPS_SENDERS, STEPS_SENDERS_LIMIT,
           STEPS_DATAGRAMS)
