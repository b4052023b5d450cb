"""Running a run: launchers (local processes, Ray jobs), the runner process, the pre-flight check,
building the estimator from a run's spec, and the reproducible bundle."""
