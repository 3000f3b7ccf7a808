"""The run's machinery: preflight, the --validate estimate, the stage graph and its stages, the second process, the
progress and the stop signals, and the runner that conducts them (runner.execute is where a run starts and ends)."""
