"""Sharing figures: structure for a small input, empty input, bad input."""

from __future__ import annotations

from typing import Any

import pytest

from planning.errors import PlanningError
from planning.viz._common import EMPTY_NAME
from planning.viz.sharing import shared_memory_figure, shared_nodes_figure, sharing_cost_figure

NODES: list[dict[str, Any]] = [
    {"shape": "1xL40S", "gpu": "L40S", "capacity_gb": 41.7, "models": [
        {"model": "a", "weights_gb": 6.4, "kv_pool_gb": 1.0, "load": 0.1, "attainment_estimate": 0.99},
        {"model": "b", "weights_gb": 16.1, "kv_pool_gb": 2.5}]},
    {"shape": "1xL4", "gpu": "L4", "capacity_gb": 20.1, "models": [{"model": "c", "weights_gb": 13.8, "kv_pool_gb": 0.1}]},
]


def test_memory_bars_split_weights_kv_free() -> None:
    fig = shared_memory_figure(NODES)
    by_name = {t.name: list(t.x) for t in fig.data}
    assert by_name["weights"] == pytest.approx([22.5, 13.8])
    assert by_name["KV pool"] == pytest.approx([3.5, 0.1])
    assert by_name["free"] == pytest.approx([41.7 - 26.0, 20.1 - 13.9])


def test_node_diagram_links_each_model_to_its_node() -> None:
    fig = shared_nodes_figure(NODES)
    sk = fig.data[0]
    assert list(sk.link.source) == [0, 0, 1]
    labels = list(sk.node.label)
    assert [labels[t] for t in sk.link.target] == ["a", "b", "c"]
    assert list(sk.link.value) == pytest.approx([7.4, 18.6, 13.9])


def test_empty_and_bad_inputs() -> None:
    assert shared_memory_figure([]).layout.annotations[0].name == EMPTY_NAME
    assert shared_nodes_figure([]).layout.annotations[0].name == EMPTY_NAME
    with pytest.raises(PlanningError, match=r"nodes\[0\].models\[0\].kv_pool_gb"):
        shared_memory_figure([{"shape": "1xL4", "gpu": "L4", "capacity_gb": 20, "models": [{"model": "x", "weights_gb": 1}]}])
    with pytest.raises(PlanningError, match=r"shared\.gpus"):
        sharing_cost_figure({"cost_per_hour": 1, "gpus": 2}, {"cost_per_hour": 1})


def test_cost_figure_splits_shared_bar() -> None:
    fig = sharing_cost_figure({"cost_per_hour": 49.2, "gpus": 48},
                              {"cost_per_hour": 44.4, "gpus": 24, "shared_cost_per_hour": 33.5})
    assert [list(t.y) for t in fig.data] == [pytest.approx([49.2, 10.9]), pytest.approx([0.0, 33.5])]
    assert "48 GPUs" in fig.layout.annotations[0].text
