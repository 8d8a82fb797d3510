"""Planning engine: catalog → performance model → serving templates → allocation → results."""

__version__ = "0.1.0"
