"""rubricrun: run LLMs over datasets, judge them criterion by criterion, report honest scores."""

__version__ = "0.1.0"
