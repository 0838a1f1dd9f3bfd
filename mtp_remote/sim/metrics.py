"""``/metrics`` of the simulated engine: Prometheus text with SGLang's metric names (``--enable-metrics``).

Names follow sglang ``observability/scheduler_metrics_mixin.py`` / ``metrics/collector.py``:
``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:gen_throughput`` (tokens/s over the last
decode-log interval), ``sglang:spec_accept_length`` (speculative servers), ``sglang:token_usage``,
``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``, ``sglang:num_requests_total``.
"""

from __future__ import annotations


def render_metrics(srv) -> str:
    """The exposition text for ``srv`` (a :class:`mtp_remote.sim.server.SimServer`)."""
    e = srv.engine
    labels = f'{{model_name="{srv.args.served_model_name}",engine_type="unified",tp_rank="0",pp_rank="0"}}'
    toks = sum(len(r.prompt_ids) + len(r.seq.output_ids) for r in e.running)
    rows = [
        ("sglang:num_running_reqs", "gauge", "The number of running requests.", len(e.running)),
        ("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", len(e.waiting)),
        ("sglang:gen_throughput", "gauge", "The generation throughput (token/s).", e.last_gen_throughput),
        ("sglang:token_usage", "gauge", "The token usage.", toks / max(srv.mem.kv_tokens, 1)),
        ("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", e.prompt_tokens_total),
        ("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.",
         e.gen_tokens_total),
        ("sglang:num_requests_total", "counter", "Number of requests processed.", e.requests_total),
    ]
    if e.spec_steps:
        rows.append(("sglang:spec_accept_length", "gauge", ("The average acceptance length of speculative "
                                                      "decoding."), e.avg_spec_accept_length or 0.0))
    out = []
    for name, kind, help_, value in rows:
        out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name}{labels} {float(value)}"]
    return "\n".join(out) + "\n"
