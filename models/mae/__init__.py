"""The masked autoencoders: the RankMe study's MAE and AudioMAE++, with the MAE (self-attention) and
CrossMAE (cross-attention) decoders and the teacher targets."""
