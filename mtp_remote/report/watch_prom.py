"""``watch``'s Prometheus text exposition: one set of gauges per live endpoint, labelled ``endpoint`` (its name)
and ``url``, from the endpoint states ``watch`` keeps (:class:`mtp_remote.watch.watch.EndpointState.to_dict`).
Pure: states in, text out (written as a node-exporter textfile, and served at ``/metrics`` by ``--listen``).

The last probe's figures: loop rate, acceptance length and tokens/s over all its samples and over the
non-looping ones (loops inflate both: compare on ``*_nonloop``), greedy outputs that match the first probe's
(``greedy_match_ratio``; ``greedy_changed`` 1 when any changed), mean request latency and the probe's duration;
running totals (probes, samples, loops, alerts); ``up`` 0 when the last probe got no answer; ``alerting`` 1 when
the last probe looped or changed a greedy output.
"""

from __future__ import annotations

from .ci import prom_label

#: (metric, state key, type, help), in exposition order.
WATCH_METRICS = (
    ("mtp_remote_watch_up", "up", "gauge", "1 when the last probe got answers, 0 when the endpoint did not answer."),
    ("mtp_remote_watch_alerting", "alerting", "gauge",
     "1 when the last probe looped or a greedy output changed since the first probe."),
    ("mtp_remote_watch_loop_rate", "loop_rate", "gauge", "Share of the last probe's samples that loop."),
    ("mtp_remote_watch_accept_length", "accept_length", "gauge",
     "Acceptance length of the last probe's samples (completion_tokens / spec_verify_ct; loops inflate it)."),
    ("mtp_remote_watch_accept_length_nonloop", "accept_length_nonloop", "gauge",
     "Acceptance length of the last probe's samples that do not loop."),
    ("mtp_remote_watch_server_accept_length", "server_accept_length", "gauge",
     "The server's own average acceptance length (/server_info: all its traffic)."),
    ("mtp_remote_watch_tokens_per_second", "tokens_per_s", "gauge",
     "Mean per-request decode tokens/s of the last probe (loops inflate it)."),
    ("mtp_remote_watch_tokens_per_second_nonloop", "tokens_per_s_nonloop", "gauge",
     "Mean per-request decode tokens/s of the last probe's samples that do not loop."),
    ("mtp_remote_watch_greedy_match_ratio", "greedy_match_ratio", "gauge",
     "Share of greedy (T=0) outputs of the last probe equal to the first probe's."),
    ("mtp_remote_watch_greedy_changed", "greedy_changed", "gauge",
     "1 when a greedy output of the last probe differs from the first probe's."),
    ("mtp_remote_watch_probe_latency_seconds", "latency_s", "gauge", "Mean request latency of the last probe (s)."),
    ("mtp_remote_watch_probe_duration_seconds", "duration_s", "gauge", "Wall time of the last probe (s)."),
    ("mtp_remote_watch_last_probe_timestamp_seconds", "last_probe_at", "gauge",
     "Start of the last probe (Unix time, s)."),
    ("mtp_remote_watch_probes_total", "probes", "counter", "Probes sent since the watch started."),
    ("mtp_remote_watch_samples_total", "samples_total", "counter", "Probe samples answered since the watch started."),
    ("mtp_remote_watch_loops_total", "loops_total", "counter", "Probe samples that looped since the watch started."),
    ("mtp_remote_watch_alerts_total", "alerts_total", "counter", "Alerting probes since the watch started."),
)


def render_watch_prometheus(states: list[dict]) -> str:
    """The text exposition of every endpoint's state (a family's HELP/TYPE once, then one sample per endpoint
    that has the value)."""
    lines: list[str] = []
    for metric, key, kind, help_text in WATCH_METRICS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        for s in states:
            v = s.get(key)
            if v is None:
                continue
            if isinstance(v, bool):
                v = int(v)
            lines.append(f'{metric}{{endpoint="{prom_label(s["endpoint"])}",url="{prom_label(s["url"])}"}} {v}')
    return "\n".join(lines) + "\n"
