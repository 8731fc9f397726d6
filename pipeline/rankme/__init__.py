"""RankMe (the effective rank of an embedding matrix, Garrido et al. 2023) and the seeded,
fingerprinted pool of pretraining crops it is measured on, one way for training and evaluation."""
