"""NCCL's own view of a running job, from its RAS service (``localhost:28028`` on every node of a job, NCCL
2.24 and later), served by the node agent's ``nccl-ras`` collector.

``comm`` is a communicator's hash as NCCL prints it (16 hex digits), ``rank`` its rank in that communicator,
``gpu`` the GPU's NVML index on the node that holds it (the GPU collector's ``gpu`` label on that node).
Per-rank series exist only for the ranks on the scraped node; a rank RAS got no data from is named by every
node that sees it missing (``lockstep_nccl_missing_rank_info``), since its own node may be the one that is
gone. Every label is bounded: communicators and missing ranks by the collector's limits, collectives by
NCCL's fixed set.
"""
from lockstep.exporters.catalog.model import counter, gauge

# What a poll of the RAS service ended with.
POLL_RESULTS = ("ok", "no_job", "timeout", "error")
# Scopes of lockstep_nccl_ras_communicators.
COMMUNICATOR_SCOPES = ("answer", "local", "exported")
# A rank's state as RAS derives it from its communicator's flags (abort, finalize/destroy, init done or not).
RANK_STATES = ("init", "running", "finalize", "abort")
# Why a rank is missing from a communicator's answer.
MISSING_REASONS = ("dead", "unresponsive", "not_member")
# NCCL's collective functions counted per rank (NCCL_NUM_FUNCTIONS, in its order); NCCL 2.24 and 2.25
# counted them together, exported as "all".
COLLECTIVES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
ALL_COLLECTIVES = "all"

COMM = ("comm", "job_id")
RANK = COMM + ("rank", "gpu")

RAS_UP = gauge(
    "lockstep_nccl_ras_up",
    "1 when the last poll of NCCL's RAS service got an answer that parsed, 0 otherwise (see "
    "lockstep_nccl_ras_polls_total for why).")
RAS_NO_JOB = gauge(
    "lockstep_nccl_ras_no_job",
    "1 while nothing listens on the RAS address (connection refused): no NCCL job with RAS runs on this node. "
    "0 while RAS answers, or fails in another way.")
RAS_POLLS = counter(
    "lockstep_nccl_ras_polls_total",
    f"Polls of the RAS service by result: {', '.join(POLL_RESULTS)} (no_job: connection refused; error: the "
    "protocol, the answer's format or its size).", ("result",))
RAS_POLL_DURATION = gauge(
    "lockstep_nccl_ras_poll_duration_seconds", "How long the last poll took: connect, handshake and answer.",
    (), "seconds")
RAS_ANSWER_AGE = gauge(
    "lockstep_nccl_ras_answer_age_seconds",
    "Age of the RAS answer the communicator and rank series come from. The last answer is served while RAS "
    "stops answering (a timeout, an error) and dropped when the job is gone (connection refused); absent "
    "before the first answer.", (), "seconds")
RAS_INFO = gauge(
    "lockstep_nccl_ras_info",
    "Always 1; the answering NCCL's version, the client protocol its RAS announced and the format of the "
    "answer (json from NCCL 2.28.7, text before: text answers name only the communicators with problems and "
    "the counts of the ranks they single out).", ("nccl_version", "protocol", "format"))
RAS_TIMEOUTS = gauge(
    "lockstep_nccl_ras_collection_timeouts",
    "Communication timeouts RAS met while gathering the answer: some process did not answer in time, and "
    "the answer may lack its data.")
RAS_COMMUNICATORS = gauge(
    "lockstep_nccl_ras_communicators",
    "Communicators by scope: answer (all the answer names), local (with a rank on this node), exported "
    "(the local ones that got series, at most lockstep_nccl_ras_communicators_limit).", ("scope",))
RAS_COMMUNICATORS_LIMIT = gauge(
    "lockstep_nccl_ras_communicators_limit",
    "At most this many communicators get series (--nccl-ras.max-communicators); those with missing ranks or "
    "errors first, then the largest.")
RAS_DEAD_PROCESSES = gauge(
    "lockstep_nccl_ras_dead_processes",
    "Job processes RAS considers dead: unreachable over its network for long enough that it stopped trying.")
RAS_UNRESPONSIVE_PROCESSES = gauge(
    "lockstep_nccl_ras_unresponsive_processes",
    "Job processes that did not answer RAS for this answer and are not (yet) considered dead.")

COMMUNICATOR_RANKS = gauge(
    "lockstep_nccl_communicator_ranks", "Ranks in the communicator (its size).", COMM)
COMMUNICATOR_MISSING_RANKS = gauge(
    "lockstep_nccl_communicator_missing_ranks",
    "Ranks of the communicator RAS got no data for: unresponsive or dead processes, or processes that no "
    "longer hold it.", COMM)
COMMUNICATOR_UNRESPONSIVE_RANKS = gauge(
    "lockstep_nccl_communicator_unresponsive_ranks",
    "Missing ranks whose process did not answer RAS (dead ones included).", COMM)
COMMUNICATOR_DEAD_RANKS = gauge(
    "lockstep_nccl_communicator_dead_ranks", "Missing ranks whose process RAS considers dead.", COMM)
COMMUNICATOR_ASYNC_ERROR_RANKS = gauge(
    "lockstep_nccl_communicator_async_error_ranks",
    "Ranks reporting an asynchronous error (what ncclCommGetAsyncError returns, other than ncclSuccess and "
    "ncclInProgress).", COMM)

RANK_COLLECTIVES = counter(
    "lockstep_nccl_rank_collectives_total",
    f"Collective operations the rank has issued on the communicator, by NCCL's name: {', '.join(COLLECTIVES)} "
    f"({ALL_COLLECTIVES!r}: NCCL 2.24 and 2.25, which counted them together). Ranks on this node only, "
    "collectives the communicator uses only. A rank whose count stops while its peers' counts are ahead is "
    "the one the job waits for.", RANK + ("collective",))
RANK_INFO = gauge(
    "lockstep_nccl_rank_info",
    f"Always 1; a rank on this node: its process, CUDA device (as the process numbers it), state "
    f"({', '.join(RANK_STATES)}: as RAS derives it from the communicator's flags; empty where the answer does "
    "not say) and asynchronous error (NCCL's ncclResult_t name; empty where the answer does not say).",
    RANK + ("pid", "cuda_dev", "state", "async_error"))
MISSING_RANK_INFO = gauge(
    "lockstep_nccl_missing_rank_info",
    f"Always 1; a rank RAS got no data for, wherever it runs: the address of its node as NCCL knows it, its "
    f"process, its GPU (NVML index on that node; empty where unknown) and why: {', '.join(MISSING_REASONS)} "
    "(reachable but no longer in the communicator). Every node's agent names it; at most "
    "--nccl-ras.max-missing-ranks per communicator.",
    COMM + ("rank", "address", "pid", "gpu", "reason"))

RANK_BEHIND = gauge(
    "lockstep_nccl_rank_collectives_behind",
    "Collective operations the rank has launched fewer of than the furthest rank of its communicator, summed over "
    "collective types, within one RAS answer (0: in front). RAS gathers an answer from every process of the job "
    "at once, so ranks compared within it are compared at one moment, wherever they run: while a job runs its "
    "ranks are a few operations apart; a rank that stays behind while none moves is the one the job waits for. "
    "Ranks on this node whose counts the answer gives (a text answer: only the ranks it singles out).",
    RANK)
RAS_NODE_ADDRESS = gauge(
    "lockstep_nccl_ras_node_address_info",
    "Always 1; an address RAS knows this node by (the host it gives for a rank on this node in the last answer): "
    "what joins the address a missing rank is named by to its node.", ("address",))

METRICS = (RAS_UP, RAS_NO_JOB, RAS_POLLS, RAS_POLL_DURATION, RAS_ANSWER_AGE, RAS_INFO, RAS_TIMEOUTS,
           RAS_COMMUNICATORS, RAS_COMMUNICATORS_LIMIT, RAS_DEAD_PROCESSES, RAS_UNRESPONSIVE_PROCESSES,
           COMMUNICATOR_RANKS, COMMUNICATOR_MISSING_RANKS, COMMUNICATOR_UNRESPONSIVE_RANKS, COMMUNICATOR_DEAD_RANKS,
           COMMUNICATOR_ASYNC_ERROR_RANKS, RANK_COLLECTIVES, RANK_INFO, MISSING_RANK_INFO, RANK_BEHIND,
           RAS_NODE_ADDRESS)
