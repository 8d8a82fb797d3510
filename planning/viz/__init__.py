"""Pure figure functions: plain data (DataFrames, dicts) in, plotly figures out, with teaching text."""

from planning.viz.colors import GPU_COLORS, gpu_color, gpu_of_shape
from planning.viz.costs import COST_COLUMNS, cost_bars, cost_treemap
from planning.viz.diff import diff_summary, gpu_diff, plan_diff, plan_diff_figure
from planning.viz.finance import bill_figure, kind_figure
from planning.viz.learn import mixed_pipeline_figure
from planning.viz.measurements import fit_figure
from planning.viz.pipeline import layer_ranges, pipeline_figure
from planning.viz.plan import baselines_figure, gpu_usage_figure, savings, served_figure
from planning.viz.templates import pareto_front, template_category, template_scatter
from planning.viz.text import EXPLANATIONS, GLOSSARY, explain
from planning.viz.whatif import sweep_figure, whatif_figure

__all__ = [
    "COST_COLUMNS",
    "EXPLANATIONS",
    "GLOSSARY",
    "GPU_COLORS",
    "baselines_figure",
    "bill_figure",
    "cost_bars",
    "cost_treemap",
    "diff_summary",
    "explain",
    "fit_figure",
    "gpu_color",
    "gpu_diff",
    "gpu_of_shape",
    "gpu_usage_figure",
    "kind_figure",
    "layer_ranges",
    "mixed_pipeline_figure",
    "pareto_front",
    "pipeline_figure",
    "plan_diff",
    "plan_diff_figure",
    "savings",
    "served_figure",
    "sweep_figure",
    "template_category",
    "template_scatter",
    "whatif_figure",
]
