"""Pure diagnosis core: text and numbers in, numbers out (no clock, network or files).

``degeneracy`` (per-sample metrics, loop detection on top of ``loops``), ``stats`` (intervals, exact tests,
bootstrap, sample sizes), ``divergence`` (greedy comparison, KL probe), ``pairing`` (matched samples across
arms), ``stopping`` (when a cell's decision is settled), ``cells`` (samples pooled per profile and temperature),
``verdict`` (cells to verdicts with evidence).
"""
