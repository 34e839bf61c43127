"""A job's view takes its nodes' median scores together (``lockstep.analytics.service.views``): the
same views as a loop over the nodes gives, on a run where a node slows down as a whole
(simulator/scenarios/slow-node.yaml), at every sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from lockstep.analytics.evaluation.evaluate import simulate
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.scoring.detections import node_evidence
from lockstep.analytics.scoring.evidence import plain
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.scoring.straggler import performance
from lockstep.analytics.service import views

SCENARIO = Path(__file__).parent.parent / "simulator/scenarios/slow-node.yaml"


def _nodes_one_by_one(res, i: int) -> tuple[views.ScoreView, ...]:
    s, nodes_col = res.stragglers, np.asarray(res.columns.get_level_values("node"))
    out = []
    for node in dict.fromkeys(nodes_col):
        flagged = bool(s.node_flagged.get(str(node), np.zeros(i + 1, bool))[i])
        out.append(views.ScoreView(str(node), None, float(performance(np.median(s.scores[i, nodes_col == node]))),
                                   flagged, plain(node_evidence(s, nodes_col == node, i)) if flagged else None))
    return tuple(out)


def test_node_views_are_those_of_a_loop_over_the_nodes():
    run = simulate(SCENARIO)
    (res,) = score_features(build_features(run.frame), run.start, run.period).values()
    assert any(flags.any() for flags in res.stragglers.node_flagged.values())
    for i in range(len(res.times)):
        gpus, nodes = views._scores(res, i)
        assert nodes == _nodes_one_by_one(res, i), i
        assert [g.score for g in gpus] == [float(performance(x)) for x in res.stragglers.scores[i]]
