"""SSAST: masked patch modelling of the spectrogram with InfoNCE and reconstruction losses."""
