"""AxLSTM: masked modelling with an mLSTM (Vision-LSTM) encoder and an MAE or CrossMAE decoder."""
