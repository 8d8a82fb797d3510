"""vLLM v0's default scheduler (no chunked prefill) on hand-computable cases: waiting prompts run first, batched
together, as a step of their own that stalls the decodes; a request that arrives while a step runs waits for its end;
a closed-loop client's next request, sent on its previous one's last token, misses the step the engine scheduled
at that instant (``Sim.arrive_after``)."""

from __future__ import annotations

import pytest

from planning.perf import PerfModel
from planning.simulate.engine import DecodeEngine, Requests
from planning.simulate.loop import Sim
from planning.simulate.routing import ModelRoutes, Router
from planning.simulate.steps import InstanceModel
from tests.simulate.conftest import instance

Q = 400  # prompt tokens of every request


def v0_engine(pm: PerfModel) -> tuple[Sim, Requests, InstanceModel]:
    """One A10G running Llama-3-8B like vLLM 0.4: prompts first, whole, up to 8192 tokens a step."""
    im = instance(pm, "llama-3-8b", "1xA10G", "aggregated", 1e6, Q, 8, max_step_tokens=8192)
    req = Requests.empty(0)
    sim = Sim([], req)
    eng = DecodeEngine(sim, im, "1xA10G", True, 8192, prefill_first=True, kv_policy="grow")
    sim.routes = [ModelRoutes(Router([eng], [1.0], "proportional"), None)]
    return sim, req, im


def test_prompts_arriving_together_share_one_prefill_step(pm: PerfModel) -> None:
    sim, req, im = v0_engine(pm)
    a, b = req.add(0.0, Q, 4, 0), req.add(0.0, Q, 4, 0)
    sim.run([a, b])
    both = im.prefill_s(2, 2 * Q)
    assert req.t_first[a] == pytest.approx(both) and req.t_first[b] == pytest.approx(both)
    assert both > im.prefill_s(1, Q)  # the second's TTFT includes the first's prompt


def test_a_prompt_arriving_during_a_prefill_waits_for_it_then_runs_before_decodes(pm: PerfModel) -> None:
    sim, req, im = v0_engine(pm)
    p1 = im.prefill_s(1, Q)
    a, b = req.add(0.0, Q, 3, 0), req.add(0.25 * p1, Q, 3, 0)
    sim.run([a, b])
    assert req.t_first[a] == pytest.approx(p1)
    assert req.t_first[b] == pytest.approx(2 * p1)  # a's decode waits for b's prompt step
    # then both decode together: two steps of two sequences at contexts Q + 1 and Q + 2 tokens
    d = im.decode_cycle_s(2, Q + 1.5)
    assert req.t_done[a] == pytest.approx(2 * p1 + 2 * d)


@pytest.mark.parametrize("deferred", [True, False])
def test_closed_loop_request_misses_the_step_scheduled_at_its_predecessors_end(pm: PerfModel,
                                                                              deferred: bool) -> None:
    """a (2 tokens) and b (3 tokens) prefill together, decode one step together; a finishes and its client sends
    c at once. vLLM v0 has already scheduled b's last decode step: c's prompt runs after it. Arriving within the
    same instant (``Sim.arrive``) c would be prefilled first and stall b."""
    sim, req, im = v0_engine(pm)
    a, b = req.add(0.0, Q, 2, 0), req.add(0.0, Q, 3, 0)
    sent: list[int] = []

    def client(s: Sim, t: float, r: int) -> None:
        if r == a:
            c = req.add(t, Q, 2, 0)
            sent.append(c)
            (s.arrive_after if deferred else s.arrive)(t, c)

    sim.on_finish = client
    sim.run([a, b])
    (c,) = sent
    p1, p2 = im.prefill_s(1, Q), im.prefill_s(2, 2 * Q)
    t_a = p2 + im.decode_cycle_s(2, Q + 1)
    d_b = im.decode_cycle_s(1, Q + 2)  # b's last step, alone, at context Q + 2
    assert req.t_done[a] == pytest.approx(t_a)
    if deferred:
        assert req.t_done[b] == pytest.approx(t_a + d_b)
        assert req.t_first[c] - req.arrival[c] == pytest.approx(d_b + p1)
    else:
        assert req.t_first[c] - req.arrival[c] == pytest.approx(p1)
        assert req.t_done[b] == pytest.approx(t_a + p1 + im.decode_cycle_s(2, Q + 1.5))  # stalled, then with c
