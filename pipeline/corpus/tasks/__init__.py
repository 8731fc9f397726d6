"""Labeled downstream tasks in the HEAR task-directory format, built offline from packaged audio.

One module per task (`build(seed=..., tiny=..., work_dir=...) -> (TaskSpec, [LabeledClip])`),
`hear_writer` writes a task directory, `build` runs them all, `baseline` is the naive probe.
"""
