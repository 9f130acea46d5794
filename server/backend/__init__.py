"""The model backend: systems that turn a dialogue context into a response, with provenance.

`base` defines the `ResponseModel` interface, `registry` builds systems from a config file, one module per
system kind (gold, replay, retrieval, retrieval-emoprepend, http, controls), `generate` fills the response
table and `metrics` computes the automatic sanity-check metrics (P@1,100, BLEU).
"""
