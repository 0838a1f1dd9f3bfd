"""The toy language model: next-token distributions from a plan and a recurrent memory of what was said.

The state of one sequence has two parts, like the hybrid models this tool diagnoses (full attention + Gated
DeltaNet/Mamba layers):

- the *surface*: the phase (opening ``<think>``, reasoning, answer, done) and the live hypotheses about which
  plan sentence is being written and how far along it is. It is a function of the committed tokens only, like
  an attention KV cache, so rolling it back is just taking an older value.
- the *memory* (:class:`Memory`, the recurrent state): which plan sentences have been said, the last one, how
  many times in a row it was repeated, and ``blur``, how many tokens the memory has absorbed that are not in
  the text. A speculative decoder must snapshot and restore it after rejected drafts; the ``state_leak``
  fault skips that, ``blur`` grows, and the model loses track of what it said.

At a sentence boundary the next sentence is a mixture: the first unsaid plan sentence (log-weight 0), the
next two unsaid ones (-2.5, -3.5), closing the think block once everything is said (-9 before that), and
repeating the last sentence with log-weight ``R(reps) + blur_gain * blur``. ``R`` rises with ``reps`` (a
repeated sentence is ever more likely to be repeated again: loops are absorbing, as in real models) and a
repeated sentence copies its earlier wording. Healthy: ``R(0) = -7``, so loops are rare.

The draft head (MTP) sees the same state; at each draft position it errs with probability
``draft_error * draft_decay ** reps`` (a deterministic function of the state), and then puts most of its
mass on a distractor token. Repetitive text is easy to draft, so acceptance *rises* in a loop.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

from mtp_remote.sim.script import Plan, Sentence, plan_for
from mtp_remote.sim.tokens import EOS_ID, THINK_OPEN, Vocab

OPEN, REASON, ANSWER, DONE = 0, 1, 2, 3
CLOSE_SID = -1
ANSWER_SID = 10_000


@dataclass(frozen=True)
class ModelKnobs:
    """Parameters of the toy model; faults change them (see :mod:`mtp_remote.sim.faults`)."""

    repeat_base: float = -7.0  #: R(0): log-weight of repeating a sentence that was said once
    blur_gain: float = 1.5  #: how much one leaked token raises the repeat log-weight
    blur_decay: float = 0.6  #: blur kept at each completed sentence
    draft_error: float = 0.2  #: probability that the draft head errs at one position (no repetition)
    draft_decay: float = 0.3  #: error rate factor per repetition of the current sentence
    draft_miss_mass: float = 0.85  #: probability mass an erring draft head puts on its distractor
    copy_boost: float = 2.5  #: log-weight bonus per repetition for reusing the same wording


@dataclass(frozen=True)
class Memory:
    """The recurrent state: sentences said (bitmask), the last one, its repeat count, blur, its wording."""

    said: int = 0
    last: int = -1
    reps: int = 0
    blur: float = 0.0
    last_alts: tuple[int, ...] = ()


# A hypothesis: (sid, segment, alternative or -1, token index, log-weight, bare, alternatives chosen).
Hyp = tuple


class State:
    """One sequence's state after some committed tokens (immutable; caches its logits)."""

    __slots__ = ("_lg", "hyps", "mem", "n", "phase", "pos", "prev")

    def __init__(self, phase: int, pos: int, hyps: tuple, mem: Memory, prev: int, n: int):
        self.phase, self.pos, self.hyps, self.mem, self.prev, self.n = phase, pos, hyps, mem, prev, n
        self._lg: dict[int, float] | None = None


def _repeat_weight(reps: int, base: float) -> float:
    if reps == 0:
        return base
    return (-1.5, 1.0, 3.0)[reps - 1] if reps <= 3 else min(4.0 + 0.5 * reps, 8.0)


class ToyModel:
    """Next-token model for one prompt. Build with :meth:`for_prompt`; all methods are pure."""

    def __init__(self, plan: Plan, vocab: Vocab, knobs: ModelKnobs, salt: int):
        self.plan = plan
        self.vocab = vocab
        self.knobs = knobs
        self.salt = salt
        self.newline = vocab.id_of("\n")
        self._distractors = [vocab.id_of(p) for p in (" the", ",", " is", " and", " a", ".", " that")]

    @classmethod
    def for_prompt(cls, prompt: str, vocab: Vocab, knobs: ModelKnobs) -> ToyModel:
        """The model conditioned on a prompt text (chat-templated or raw)."""
        return cls(plan_for(prompt, vocab), vocab, knobs, zlib.crc32(prompt.encode()))

    # ---- structure -------------------------------------------------------------------------------
    def initial_state(self) -> State:
        """The state right after the prompt: the model is about to open its think block."""
        return State(OPEN, 0, (), Memory(), -1, 0)

    def _sentence(self, sid: int) -> Sentence:
        if sid == CLOSE_SID:
            return self.plan.close
        if sid >= ANSWER_SID:
            return self.plan.answer[sid - ANSWER_SID]
        return self.plan.reasoning[sid]

    def _boundary(self, st: State) -> tuple:
        bare = st.prev == self.newline or st.prev == -1
        if st.phase == ANSWER:
            if st.pos >= len(self.plan.answer):
                return ()
            return ((ANSWER_SID + st.pos, 0, -1, 0, 0.0, bare, ()),)
        mem = st.mem
        n = len(self.plan.reasoning)
        unsaid = [i for i in range(n) if not mem.said >> i & 1]
        hyps = [(sid, 0, -1, 0, w, bare, ()) for sid, w in zip(unsaid[:3], (0.0, -2.5, -3.5))]
        if mem.last >= 0:
            w = _repeat_weight(mem.reps, self.knobs.repeat_base) + self.knobs.blur_gain * mem.blur
            hyps.append((mem.last, 0, -1, 0, w, bare, ()))
        hyps.append((CLOSE_SID, 0, -1, 0, -9.0 if unsaid else 0.0, bare, ()))
        return tuple(hyps)

    def _alt_weights(self, st: State, h: Hyp, seg) -> list[float]:
        ws = [w for _, w in seg]
        mem = st.mem
        if h[0] == mem.last and h[0] >= 0 and (mem.said >> h[0] & 1) and h[1] < len(mem.last_alts):
            ws[mem.last_alts[h[1]]] += self.knobs.copy_boost * (1 + min(mem.reps, 4))
        m = max(ws)
        lse = m + math.log(sum(math.exp(w - m) for w in ws))
        return [w - lse for w in ws]

    # ---- distributions -------------------------------------------------------------------------
    def logits(self, st: State) -> dict[int, float]:
        """Unnormalized log-weights of the possible next tokens (a few entries; insertion-ordered)."""
        if st._lg is not None:
            return st._lg
        if st.phase == OPEN:
            lg = {(THINK_OPEN, self.newline)[min(st.pos, 1)]: 0.0}
        elif st.phase == DONE:
            lg = {EOS_ID: 0.0}
        else:
            hyps = st.hyps or self._boundary(st)
            if not hyps:
                lg = {EOS_ID: 0.0}
            else:
                acc: dict[int, float] = {}
                for h in hyps:
                    sent = self._sentence(h[0])
                    seg = (sent.bare if h[5] else sent.spaced)[h[1]]
                    if h[2] == -1:
                        for (ids, _), aw in zip(seg, self._alt_weights(st, h, seg)):
                            _acc(acc, ids[0], h[4] + aw)
                    else:
                        _acc(acc, seg[h[2]][0][h[3]], h[4])
                lg = acc
        st._lg = lg
        return lg

    def step(self, st: State, token: int) -> State:
        """The state after committing ``token``; tokens the plan does not expect reset to a boundary."""
        n = st.n + 1
        if token == EOS_ID or st.phase == DONE:
            return State(DONE, 0, (), st.mem, token, n)
        if st.phase == OPEN:
            if st.pos >= 1:
                return State(REASON, 0, (), st.mem, token, n)
            return State(OPEN, st.pos + 1, (), st.mem, token, n)
        hyps = st.hyps or self._boundary(st)
        nxt: list = []
        done: list = []
        for h in hyps:
            sid, si, ai, ti, w, bare, alts = h
            sent = self._sentence(sid)
            segs = sent.bare if bare else sent.spaced
            seg = segs[si]
            if ai == -1:
                cands = [(a, ids, aw) for a, ((ids, _), aw) in enumerate(zip(seg, self._alt_weights(st, h, seg)))
                         if ids[0] == token]
                if not cands:
                    continue
                ai, ids, aw = cands[0]
                w, alts, ti = w + aw, alts + (ai,), 1
            else:
                ids = seg[ai][0]
                if ids[ti] != token:
                    continue
                ti += 1
            if ti == len(ids):
                si, ai, ti = si + 1, -1, 0
                if si == len(segs):
                    done.append((w, sid, alts))
                    continue
            nxt.append((sid, si, ai, ti, w, bare, alts))
        if done:
            _, sid, alts = max(done, key=lambda d: d[0])
            return self._complete(st, sid, alts, token, n)
        if not nxt:  # off-script token: start over at a boundary
            return State(st.phase, st.pos, (), st.mem, token, n)
        return State(st.phase, st.pos, tuple(nxt), st.mem, token, n)

    def _complete(self, st: State, sid: int, alts: tuple, token: int, n: int) -> State:
        mem = st.mem
        blur = mem.blur * self.knobs.blur_decay
        if sid == CLOSE_SID:
            return State(ANSWER, 0, (), replace(mem, blur=blur), token, n)
        if sid >= ANSWER_SID:
            return State(ANSWER, st.pos + 1, (), mem, token, n)
        if mem.said >> sid & 1 and sid == mem.last:
            mem = replace(mem, reps=mem.reps + 1, blur=blur, last_alts=alts)
        else:
            mem = Memory(said=mem.said | (1 << sid), last=sid, reps=0, blur=blur, last_alts=alts)
        return State(REASON, st.pos, (), mem, token, n)

    def leak(self, st: State, n_tokens: int) -> State:
        """``st`` with ``n_tokens`` rejected draft tokens absorbed into the memory (the state_leak fault)."""
        if n_tokens <= 0:
            return st
        return State(st.phase, st.pos, st.hyps, replace(st.mem, blur=st.mem.blur + n_tokens), st.prev, st.n)

    # ---- draft head ----------------------------------------------------------------------------
    def draft_errs(self, st: State, depth: int) -> bool:
        """Whether the draft head errs at this state and draft depth (deterministic in the state)."""
        rate = self.knobs.draft_error * self.knobs.draft_decay ** st.mem.reps
        u = zlib.crc32(f"{self.salt}:{st.n}:{st.prev}:{depth}".encode()) / 2**32
        return u < rate

    def distractor(self, st: State, avoid: int) -> int:
        """The token an erring draft head proposes instead of ``avoid``."""
        i = (st.n * 7 + st.prev) % len(self._distractors)
        d = self._distractors[i]
        return d if d != avoid else self._distractors[(i + 1) % len(self._distractors)]


def _acc(acc: dict[int, float], tok: int, w: float) -> None:
    old = acc.get(tok)
    if old is None:
        acc[tok] = w
    else:
        m = max(old, w)
        acc[tok] = m + math.log(math.exp(old - m) + math.exp(w - m))
