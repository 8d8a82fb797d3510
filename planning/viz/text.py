"""Teaching text: one or two sentences per chart and a plain-language glossary."""

from __future__ import annotations

from planning.errors import UnknownIdError

EXPLANATIONS: dict[str, str] = {
    "pipeline_figure": (
        "One serving template: the model's layers are split into pipeline stages (left to right), and each "
        "box is a node holding that stage's layers; several boxes in a stage are copies sharing the load. "
        "Mixing GPU types lets cheap GPUs hold the layers that fit them while pricier ones take the rest."
    ),
    "cost_treemap": (
        "Where the money goes: each rectangle's area is its share of the plan's dollars per hour, nested "
        "model → phase → region → node shape. Big blocks are where a cheaper GPU or region would save most."
    ),
    "cost_bars": (
        "Cost per hour per group, stacked by node shape (same colour = same GPU type, hatching = a different "
        "node size). Compare bar heights to see which model or region drives the bill."
    ),
    "gpu_usage_figure": (
        "Nodes the plan rents in each region against how many are available there (the black tick is the "
        "cap). Bars at the cap show where scarcity forced the plan to use other GPUs or regions."
    ),
    "served_figure": (
        "Demand each model and phase asked for against what the plan serves. A bar under 100 % means the "
        "budget or the available GPUs could not cover all requests within the latency targets."
    ),
    "fit_figure": (
        "Each of your measured numbers (TTFT, ITL, throughput) against what the simulator predicts for the same "
        "setting: hollow markers before the fit, filled after it. On the diagonal the prediction equals the "
        "measurement; the fit moves only a few physical rates (prefill, decode, per-step overhead)."
    ),
    "bill_figure": (
        "The bill month by month over the finance horizon, stacked by pricing kind (owned, reserved, on-demand, "
        "spot) or by model, region or cloud. Reserved and owned blocks stay the same each month: they are "
        "paid whether the plan uses them or not."
    ),
    "kind_figure": (
        "The plan's dollars per hour by how the capacity is bought: owned and reserved nodes carry their fixed "
        "cost (used or idle), on-demand and spot what the plan rents. Idle owned capacity is a cost, never a "
        "saving."
    ),
    "baselines_figure": (
        "The mixed-GPU plan next to the baselines: homogeneous replicas, Cauchy's prefill–decode GPU combos, a "
        "single GPU type, memP. The percentage is what the plan saves against each; a grey 'infeasible' bar means "
        "that baseline cannot meet the targets with the available GPUs."
    ),
    "template_scatter": (
        "Each dot is a serving template: further left is cheaper, higher serves more tokens per second. "
        "Templates on the dotted Pareto front give the most throughput for their price, often mixing GPU types."
    ),
    "whatif_figure": (
        "Each variant of the scenario solved again, with the mixed plan and every baseline (homogeneous, Cauchy, "
        "single GPU type, memP) side by side. It shows how robust the savings are when demand, prices or "
        "availability change."
    ),
    "mixed_pipeline_figure": (
        "Prompt tokens per second per dollar-hour of one pipeline for one model: the best setup of each single GPU "
        "type (coloured by its GPU) and mixed pipelines (black). Past the dashed line, a pipeline does better per "
        "dollar than any one GPU type can (Coral Fig. 1(a))."
    ),
    "sweep_figure": (
        "Cost as one input is swept (e.g. demand), for the mixed plan (thick) and each single GPU type "
        "(thin). Where a thin line stops, that GPU alone can no longer meet the targets."
    ),
    "plan_diff": (
        "Instance lines that differ between two plans: added, removed or resized, with the cost change. "
        "Read it to see which nodes a what-if swapped in or out."
    ),
    "gpu_diff": "GPUs of each type in the two plans and the change, largest change first.",
    "plan_diff_figure": (
        "A waterfall from the old plan's cost to the new one: green steps save money, red steps add cost. "
        "Hover a step for the sentence that explains it."
    ),
}

GLOSSARY: dict[str, str] = {
    "TTFT": (
        "Time to first token: how long a user waits, after sending a prompt, before the first word of the "
        "answer appears. It is set by the prefill phase."
    ),
    "TPOT": (
        "Time per output token: the gap between successive words of the answer once it has started. It is "
        "set by the decode phase; 50 ms is about 20 tokens per second."
    ),
    "template": (
        "A serving template is one recipe for running a model: which node shapes are used, how the layers "
        "are split into pipeline stages, and the throughput that recipe achieves within the latency targets."
    ),
    "instance": (
        "An instance is one template rented in one region. A plan is a list of instances with counts; its "
        "cost is the sum of the node prices."
    ),
    "prefill": (
        "The first phase of a request: the model reads the whole prompt at once. It is compute-heavy and "
        "its speed sets TTFT."
    ),
    "decode": (
        "The second phase: the model writes the answer one token at a time, rereading its memory of the "
        "prompt each step. It is memory-bandwidth-heavy and its speed sets TPOT."
    ),
    "pipeline stage": (
        "A slice of consecutive model layers placed on one node; a request flows through the stages in "
        "order, like an assembly line, so a large model can span several smaller GPUs."
    ),
    "data-parallel": (
        "Running several identical copies (replicas) side by side, each serving different requests, to "
        "multiply throughput."
    ),
    "tensor parallel": (
        "Splitting each layer's matrices across the GPUs of one node so they compute one layer together; "
        "it needs the fast links inside a node."
    ),
    "SLO": (
        "Service-level objective: the latency promise a plan must keep, here a TTFT limit for prefill and "
        "a TPOT limit for decode."
    ),
    "availability": (
        "How many nodes of a shape a region can actually rent out. Plans respect this cap, which is why "
        "they sometimes use a second-choice GPU or region."
    ),
    "spot": (
        "Spare cloud capacity sold at a discount that the cloud may take back at short notice; cheaper, "
        "but a plan that relies on it can lose nodes."
    ),
    "shape": 'A node configuration independent of region: the number and type of GPUs, e.g. "2xL40S".',
    "baseline": (
        "A simpler plan to compare against, usually one that uses a single GPU type everywhere; the savings "
        "figure is measured against it."
    ),
    "ILP": (
        "Integer linear program: a model of the choice (how many of each template, where) as whole-number "
        "variables, linear costs and linear limits, solved exactly by a solver such as HiGHS."
    ),
    "MIP gap": (
        "How far the best plan found may still be from the best possible one, as a share of its cost: the "
        "solver proves no plan is cheaper than cost × (1 − gap). 0 % means the plan is proven optimal."
    ),
    "goodput": (
        "Tokens per second of requests served within their latency targets; requests that miss the SLO do "
        "not count."
    ),
    "attainment": "The share of requests that met both latency targets (TTFT and TPOT) in a simulation.",
    "headroom": (
        "How much more traffic a plan carries before attainment drops below its target, as a factor of the "
        "planned demand (×1.3 = 30 % spare)."
    ),
    "KV cache": (
        "The model's memory of a request's tokens (keys and values of every layer), kept on the GPU while the "
        "answer is written. Its size limits how many requests a GPU can batch."
    ),
    "Nmax": "The most nodes one serving template (one pipeline) may span; Coral prunes templates at 6.",
    "ρ": (
        "rho: how many of the cheapest templates per GPU-type combination are kept when the library is pruned "
        "(Coral uses 12)."
    ),
    "K": (
        "The start-up penalty factor: starting a node costs K × its hourly price (Coral: 0.1, a node takes "
        "about 6 minutes of an hour to start and load weights)."
    ),
    "memP": (
        "LLMFabric's memory-proportional baseline: each model gets GPUs in proportion to its memory needs, "
        "without looking at prices or latency."
    ),
    "roofline": (
        "A performance model that bounds each step by the slower of compute (FLOPs ÷ peak FLOP/s) and memory "
        "traffic (bytes ÷ bandwidth); calibration factors bring it to measured speeds."
    ),
    "makespan": "The time to finish a fixed batch of requests: the finishing time of the slowest GPU.",
    "break-even": (
        "The point where two options cost the same, e.g. the hours of use per month above which owning or "
        "reserving a GPU is cheaper than renting it on demand."
    ),
    "TP-2": "Tensor parallelism over two GPUs: one model replica whose layers are split across two GPUs.",
    "T/$": ("Tokens per dollar: the input and output tokens a GPU serves per dollar of its hourly price, at the "
            "highest load that still meets the SLO (Mélange Sec. 4.1). For one request size both GPUs serve the "
            "same tokens per request, so their T/$ ratio is their requests per second per dollar ratio."),
    "bucket": ("A request-size bucket: a range of input and of output lengths (Mélange: ≤ 25, 100, 250, 500, 1000, "
               "2000 tokens each way); a workload is a histogram of request rates over buckets."),
    "profile": ("A throughput profile: the requests per second one GPU sustains within the SLO for each request-size "
                "bucket, measured once per GPU type (Mélange Sec. 5.3) and read by the allocation."),
}


def explain(name: str) -> str:
    """The teaching sentence(s) for a chart function (``"pipeline_figure"``) or glossary term (``"TTFT"``).

    Parameters
    ----------
    name:
        A key of :data:`EXPLANATIONS` or :data:`GLOSSARY`.

    Returns
    -------
    str

    Raises
    ------
    UnknownIdError
        If ``name`` is in neither table (the message lists the closest names).
    """
    if name in EXPLANATIONS:
        return EXPLANATIONS[name]
    if name in GLOSSARY:
        return GLOSSARY[name]
    raise UnknownIdError("explain.name", name, [*EXPLANATIONS, *GLOSSARY])
