"""Decoding one sequence: plain sampling, or draft-then-verify speculative decoding on top of the toy model.

Speculative decoding here is the standard algorithm (Leviathan et al. 2023; Chen et al. 2023) with a chain of
``k`` draft tokens (topk 1): the draft head proposes ``x_1..x_k`` from distributions ``q_i``; the target model
scores every prefix; ``x_i`` is accepted with probability ``min(1, p_i(x_i) / q_i(x_i))`` (at T = 0: iff it is
the target's argmax); the first rejection is replaced by a sample from ``norm(max(0, p_i - q_i))`` (the argmax
at T = 0); when all are accepted a bonus token comes from ``p_{k+1}``. The committed tokens therefore follow
the target distribution exactly, and at T = 0 they equal greedy decoding token for token. After the step the
sequence's state is the one after the last committed token; with ``leak=True`` (the state_leak fault) the
recurrent memory also keeps the rejected drafts (:meth:`ToyModel.leak`). With ``accept_all=True`` (the
accept_all_drafts fault, the real engine's ``real-hybrid-overaccept``) verification accepts every draft token
as if the target had produced it: acceptance is ``k + 1``, the output is the draft head's (wrong wherever the
draft errs), the state stays the one after the committed tokens (no loops), and the logprobs reported are the
target's own for those tokens (prefill scoring agrees: the KL probe sees nothing).

Acceptance length as SGLang computes it: ``completion_tokens / spec_verify_ct``.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field

from mtp_remote.sim.model import State, ToyModel
from mtp_remote.sim.tokens import EOS_ID

Dist = list[tuple[int, float]]  # (token id, probability), probabilities sum to 1


@dataclass
class SamplingParams:
    """SGLang's sampling parameters that the sim honours. ``temperature`` 0 means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_new_tokens: int = 128
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    seed: int | None = None
    top_logprobs_num: int = 0  # request-level: keep the top-k raw logprobs of each output position


def target_dist(logits: dict[int, float], sp: SamplingParams) -> Dist:
    """Apply temperature, top-k and top-p to raw log-weights; T ~ 0 gives a one-hot at the first argmax."""
    items = list(logits.items())
    if sp.temperature < 1e-5:
        best = max(items, key=lambda kv: kv[1])[0]
        return [(best, 1.0)]
    m = max(w for _, w in items)
    probs = [(t, math.exp((w - m) / sp.temperature)) for t, w in items]
    probs.sort(key=lambda tp: -tp[1])
    if sp.top_k and sp.top_k > 0:
        probs = probs[: sp.top_k]
    z = sum(p for _, p in probs)
    probs = [(t, p / z) for t, p in probs]
    if sp.top_p < 1.0:
        kept, cum = [], 0.0
        for t, p in probs:
            kept.append((t, p))
            cum += p
            if cum >= sp.top_p:
                break
        z = sum(p for _, p in kept)
        probs = [(t, p / z) for t, p in kept]
    return probs


def raw_logprob(logits: dict[int, float], token: int) -> float:
    """log p(token) under the raw (T = 1) distribution; -30 for a token the model gives no mass."""
    if token not in logits:
        return -30.0
    m = max(logits.values())
    lse = m + math.log(sum(math.exp(w - m) for w in logits.values()))
    return logits[token] - lse


def top_logprobs(logits: dict[int, float], k: int) -> list[tuple[float, int]]:
    """The ``k`` most likely tokens under the raw (T = 1) distribution: [(logprob, token id)], best first."""
    m = max(logits.values())
    lse = m + math.log(sum(math.exp(w - m) for w in logits.values()))
    best = sorted(logits.items(), key=lambda kv: -kv[1])[:k]
    return [(w - lse, t) for t, w in best]


def sample(dist: Dist, rng: random.Random) -> int:
    """Draw one token from ``dist``."""
    if len(dist) == 1:
        return dist[0][0]
    u = rng.random()
    for t, p in dist:
        u -= p
        if u <= 0:
            return t
    return dist[-1][0]


def argmax(dist: Dist) -> int:
    """The most probable token (first one on ties)."""
    return max(dist, key=lambda tp: tp[1])[0]


#: Kernel paths with their own rounding under ``numeric_noise``: plain decode, speculative verify, prefill.
PLAIN, VERIFY, PREFILL = 0, 1, 2


def jittered(model: ToyModel, st: State, sigma: float, path: int, batch: int = 1, launch: int = 0) -> dict[int, float]:
    """``model.logits(st)`` plus a jitter of standard deviation ``sigma`` nats per token that depends on the
    kernel ``path``, on the ``batch`` size the step ran in and on the ``launch`` (the ``numeric_noise``
    fault: bf16 kernels that differ between decode, verify and prefill, whose reductions split differently
    with the batch composition and whose atomics differ run to run — so near ties flip between two launches of
    one server and logprobs disagree slightly). Deterministic given all four; batch 1, launch 0 is the
    jitter of a lone request in process. ``sigma`` 0 returns the logits."""
    lg = model.logits(st)
    if sigma <= 0:
        return lg
    out = {}
    where = f":{batch}:{launch}" if (batch, launch) != (1, 0) else ""
    for tok, w in lg.items():
        u = zlib.crc32(f"{model.salt}:{st.n}:{st.prev}:{tok}:{path}{where}".encode()) / 2**32
        out[tok] = w + (u - 0.5) * 3.4641016 * sigma  # uniform with standard deviation sigma
    return out


class Sequence:
    """One request being decoded: its state, output tokens, logprobs and speculative counters.

    ``spec_steps`` = 0 decodes one token per step; > 0 runs one draft-then-verify step per :meth:`step`.
    ``noise``: the ``numeric_noise`` sigma (nats), 0 for bitwise-exact kernels.
    """

    def __init__(self, model: ToyModel, sp: SamplingParams, rng: random.Random, spec_steps: int = 0,
                 leak: bool = False, noise: float = 0.0, launch: int = 0, accept_all: bool = False):
        self.noise = noise
        self.launch = launch  # the server launch's numeric salt (numeric_noise)
        self.batch = 1  # requests in the batch of the current step (set by the engine)
        self._path = VERIFY if spec_steps > 0 else PLAIN
        self.model = model
        self.sp = sp
        self.rng = rng
        self.spec_steps = spec_steps
        self.leak = leak
        self.accept_all = accept_all  # the accept_all_drafts fault: verification accepts every draft
        self.state: State = model.initial_state()
        self.output_ids: list[int] = []
        self.logprobs: list[float] = []
        self.top_logprobs: list[list[tuple[float, int]]] = []  # per output position, when asked for
        self.verify_ct = 0
        self.accept_hist: list[int] = [0] * (spec_steps + 1)  # verify steps by draft tokens accepted
        self.finish_reason: dict | None = None
        self._text_len_checked = 0

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def step(self) -> int:
        """Advance one decode step (plain) or one verify step (speculative); returns tokens committed."""
        if self.finished:
            return 0
        if self.spec_steps <= 0:
            lg = self._logits(self.state)
            tok = self._pick(target_dist(lg, self.sp))
            return self._commit([(tok, self.state)], self.model.step(self.state, tok))
        return self._spec_step()

    def _logits(self, st: State) -> dict[int, float]:
        return jittered(self.model, st, self.noise, self._path, min(self.batch, 64), self.launch) if self.noise \
            else self.model.logits(st)

    def _pick(self, dist: Dist) -> int:
        return argmax(dist) if self.sp.temperature < 1e-5 else sample(dist, self.rng)

    def _draft_dist(self, st: State, depth: int, p: Dist) -> Dist:
        if not self.model.draft_errs(st, depth):
            return p
        d = self.model.distractor(st, argmax(p))
        miss = self.model.knobs.draft_miss_mass
        q = [(t, (1 - miss) * pr) for t, pr in p if t != d]
        return [(d, miss + (1 - miss) * dict(p).get(d, 0.0))] + q

    def _spec_step(self) -> int:
        model, sp, greedy = self.model, self.sp, self.sp.temperature < 1e-5
        states = [self.state]
        drafts: list[int] = []
        qs: list[Dist] = []
        ps: list[Dist] = []
        for depth in range(self.spec_steps):
            st = states[-1]
            p = target_dist(self._logits(st), sp)
            q = self._draft_dist(st, depth, p)
            x = argmax(q) if greedy else sample(q, self.rng)
            ps.append(p)
            qs.append(q)
            drafts.append(x)
            states.append(model.step(st, x))
        accepted = 0
        correction = None
        for i, x in enumerate(drafts):
            p, q = ps[i], qs[i]
            if self.accept_all:
                ok = True
            elif greedy:
                ok = x == argmax(p)
            else:
                px, qx = dict(p).get(x, 0.0), dict(q)[x]
                ok = self.rng.random() < min(1.0, px / qx)
            if ok:
                accepted += 1
                continue
            if greedy:
                correction = argmax(p)
            else:
                qd = dict(q)
                resid = [(t, max(0.0, pr - qd.get(t, 0.0))) for t, pr in p]
                z = sum(r for _, r in resid)
                correction = sample([(t, r / z) for t, r in resid], self.rng) if z > 0 else argmax(p)
            break
        if correction is None:
            correction = self._pick(target_dist(self._logits(states[-1]), sp))
        base = states[accepted]
        if self.leak:
            base = model.leak(base, len(drafts) - accepted)
        committed = [(drafts[i], states[i]) for i in range(accepted)] + [(correction, base)]
        self.verify_ct += 1
        self.accept_hist[accepted] += 1
        return self._commit(committed, model.step(base, correction))

    def _commit(self, toks: list[tuple[int, State]], final: State) -> int:
        """Append tokens (each with the state that predicted it) until a finish condition; set the state."""
        n = 0
        for tok, st in toks:
            self.output_ids.append(tok)
            logits = self._logits(st)
            self.logprobs.append(raw_logprob(logits, tok))
            if self.sp.top_logprobs_num:
                self.top_logprobs.append(top_logprobs(logits, self.sp.top_logprobs_num))
            n += 1
            if self._check_finish(tok):
                break
        self.state = final
        return n

    def _check_finish(self, tok: int) -> bool:
        sp = self.sp
        if (tok == EOS_ID and not sp.ignore_eos) or tok in sp.stop_token_ids:
            self.finish_reason = {"type": "stop", "matched": tok}
            return True
        if sp.stop:
            tail = self.model.vocab.decode(self.output_ids[-64:])
            for s in sp.stop:
                if s and s in tail:
                    self.finish_reason = {"type": "stop", "matched": s}
                    return True
        if len(self.output_ids) >= sp.max_new_tokens:
            self.finish_reason = {"type": "length", "length": sp.max_new_tokens}
            return True
        return False


def score_tokens(model: ToyModel, ids: list[int], noise: float = 0.0, launch: int = 0) -> list[float]:
    """Prefill scoring: raw logprob of each of ``ids`` given the ones before, from the initial state (clean:
    no speculation, nothing leaked). On a healthy server this equals the decode-time logprobs (up to the
    ``numeric_noise`` jitter of the prefill path, ``noise`` nats, on this ``launch``)."""
    st = model.initial_state()
    out = []
    for t in ids:
        out.append(raw_logprob(jittered(model, st, noise, PREFILL, 1, launch), t))
        st = model.step(st, t)
    return out
