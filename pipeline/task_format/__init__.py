"""The HEAR task-directory format, the contract between the task builders (`pipeline.corpus`, which
write it) and evaluation (which reads it): layout, label kinds, and the reader that checks it."""
