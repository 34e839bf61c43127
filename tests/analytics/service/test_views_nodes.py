"""A job's view takes its nodes' median scores together (``lockstep.analytics.service.views``): the
same views (scores, evidence, causes, actions) as a loop over the GPUs and the nodes gives, on a run
where a node slows down as a whole (simulator/scenarios/slow-node.yaml), at every sample."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.evaluation.evaluate import simulate
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.scoring.detections import action, gpu_cause, gpu_evidence, node_cause, node_evidence
from lockstep.analytics.scoring.evidence import plain
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.scoring.straggler import performance
from lockstep.analytics.service import views
from tests.helpers.paths import REPO

SCENARIO = REPO / "simulator/scenarios/slow-node.yaml"


def _one_by_one(res, i: int) -> tuple[tuple[views.ScoreView, ...], tuple[views.ScoreView, ...]]:
    s, nodes_col = res.stragglers, np.asarray(res.columns.get_level_values("node"))
    gpus = []
    for j, (_, node, gpu) in enumerate(res.columns):
        flagged = bool(s.flagged[i, j])
        found, why = gpu_cause(s, j) if flagged else (None, {})
        gpus.append(views.ScoreView(node, gpu, float(performance(s.scores[i, j])), flagged,
                                    plain({**gpu_evidence(s, i, j), "cause": why}) if flagged else None, found,
                                    action(node, gpu, found) if flagged else None))
    nodes = []
    for node in dict.fromkeys(nodes_col):
        flags = s.node_flagged.get(str(node), np.zeros(i + 1, bool))
        flagged, mask = bool(flags[i]), nodes_col == node
        found, why = node_cause(s, mask, flags) if flagged else (None, {})
        nodes.append(views.ScoreView(str(node), None, float(performance(np.median(s.scores[i, mask]))), flagged,
                                     plain({**node_evidence(s, mask, i), "cause": why}) if flagged else None, found,
                                     action(str(node), None, found) if flagged else None))
    return tuple(gpus), tuple(nodes)


def test_views_are_those_of_a_loop_over_the_gpus_and_the_nodes():
    run = simulate(SCENARIO)
    (res,) = score_features(build_features(run.frame), run.start, run.period).values()
    assert any(flags.any() for flags in res.stragglers.node_flagged.values())
    for i in range(len(res.times)):
        assert views._scores(res, i) == _one_by_one(res, i), i
