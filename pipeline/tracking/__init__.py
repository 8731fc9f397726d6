"""MLflow, and the only package that imports it: runs, their parameters, metrics and artifacts, the
system metrics of the nodes, and where the tracking store is."""
