"""The study's record in MLflow: every key it writes, and typed records that write and read themselves.

A study crosses stages through MLflow (the driver, Ray workers, `python -m sweeps.laws`,
`python -m sweeps.external`), so what a trial, a checkpoint, an external point or the RankMe pool
wrote must read back as the same typed value. `keys` names everything once; `trial`,
`checkpoint_point`, `external_point` and `rankme_pool` are the records; `study` reads a whole study
(its run and its children, listed once) for every consumer.
"""
