"""Training the backend's own systems on a corpus in the store: the fine-tuned retrieval bi-encoder
(`retrieval.py`, `empeval train retrieval`) and the checkpoint cache they share (`checkpoints.py`)."""
