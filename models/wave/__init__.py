"""Waveform models: wav2vec 2.0, its conformer variant and HuBERT, with their feature encoders,
quantizer, span masking and the k-means teacher targets."""
