"""Real and rendered audio from Debian packages, one module per source family.

Each family has `prepare_<source>(...)` functions (lhotse style) that list or render audio and
return `SourceClip` records; the pretraining mixture (`default_mix`) and the task builders
(`pipeline.corpus.tasks`) draw from them. Which speakers, kits, soundfonts and prompts are held out
for the tasks' test splits is fixed in `holdout`, so the pretraining corpus can leave them out.
"""
