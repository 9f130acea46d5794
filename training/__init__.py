"""Offline training, a room of its own beside server/: it owns no request-time state. It trains the backend's own
systems on a corpus in the store: the fine-tuned retrieval bi-encoder (`retrieval.py`, `empeval train retrieval`,
its parameters in `config.py`) and the CoBERT-style selector (`cobert.py`, `empeval train cobert`). It reads
the store and the backend's encoders and writes checkpoints where the backend finds them
(empeval.server.backend.checkpoints); nothing in server/, tasks/ or analysis/ imports it."""
