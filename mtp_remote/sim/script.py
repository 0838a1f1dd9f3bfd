"""What the toy model wants to say about a prompt: a reasoning plan and an answer, as sentence templates.

A :class:`Plan` is built deterministically from the user's question: a first sentence that restates it ("The
user's question is 2+2."), some working sentences specific to the kind of question (arithmetic, capital
city, writing, code, explanation, list, other), some generic checking sentences, and a conclusion; then a few
answer sentences. Templates contain alternatives, ``{first|second|third}``, so that sampling at T > 0 gives
varied but readable text; the first alternative is preferred (weight 3, the others 1). The model
(:mod:`mtp_remote.sim.model`) turns the plan into next-token distributions.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass

from mtp_remote.sim.tokens import Vocab, split_pieces

#: One sentence: segments; a segment is a tuple of alternatives (token-id tuple, log weight).
Segment = tuple[tuple[tuple[int, ...], float], ...]


@dataclass(frozen=True)
class Sentence:
    """A compiled sentence: ``spaced`` follows a space, ``bare`` starts a line (first piece without space)."""

    spaced: tuple[Segment, ...]
    bare: tuple[Segment, ...]
    text: str


@dataclass(frozen=True)
class Plan:
    """Reasoning sentences (in preferred order), the think-closing tail, and the answer sentences."""

    reasoning: tuple[Sentence, ...]
    close: Sentence
    answer: tuple[Sentence, ...]


_ALT_RE = re.compile(r"\{([^{}]*)\}")


def compile_sentence(template: str, vocab: Vocab) -> Sentence:
    """Compile a template like ``"The user {asks|wants to know} {x}."`` into segments of token ids.

    A space just before ``{`` moves into every alternative, so pieces keep GPT-style leading spaces.
    """
    parts: list[list[str]] = []
    pos = 0
    for m in _ALT_RE.finditer(template):
        lit = template[pos:m.start()]
        lead = ""
        if lit.endswith(" "):
            lit, lead = lit[:-1], " "
        if lit:
            parts.append([lit])
        parts.append([lead + alt for alt in m.group(1).split("|")])
        pos = m.end()
    if template[pos:]:
        parts.append([template[pos:]])

    def build(bare: bool) -> tuple[Segment, ...]:
        segs: list[Segment] = []
        first = True
        for alts in parts:
            seen: set[int] = set()
            seg = []
            for i, alt in enumerate(alts):
                text = alt
                if first and not alt.startswith("\n"):
                    text = alt.lstrip(" ") if bare else (" " + alt.lstrip(" "))
                ids = tuple(vocab.id_of(p) for p in split_pieces(text))
                if not ids or ids[0] in seen:
                    continue
                seen.add(ids[0])
                seg.append((ids, math.log(3.0 if i == 0 else 1.0)))
            if seg:
                segs.append(tuple(seg))
                first = False
        return tuple(segs)

    return Sentence(spaced=build(False), bare=build(True), text=template)


def user_question(prompt: str) -> str:
    """The last user turn of a chat-templated prompt, or the whole prompt; whitespace-trimmed."""
    if "<|im_start|>user" in prompt:
        chunk = prompt.rsplit("<|im_start|>user", 1)[1]
        return chunk.split("<|im_end|>", 1)[0].strip()
    return prompt.strip()


_ARITH_RE = re.compile(r"(-?\d+)\s*([-+*x×/])\s*(-?\d+)")
_NUM_WORDS = {"+": "plus", "-": "minus", "*": "times", "x": "times", "×": "times", "/": "divided by"}


def _topic(question: str) -> str:
    q = re.sub(r"\s+", " ", question).strip().rstrip("?.!")
    q = re.sub(r"^(please |can you |could you |what is |what are |who is |tell me |explain |describe |write )",
               "", q, flags=re.IGNORECASE)
    words = q.split(" ")
    return " ".join(words[:10]) if words and words[0] else "this"


def _arith(m: re.Match) -> tuple[list[str], list[str]]:
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op in "*x×":
        r = a * b
    else:
        r = a / b if b else float("nan")
    res = str(int(r)) if float(r).is_integer() else f"{r:.4g}"
    expr = f"{a}{'*' if op in 'x×' else op}{b}"
    word = _NUM_WORDS[op]
    work = [
        f"The user's question is {expr}.",
        "{This is|That is|It is} a simple {arithmetic|math} question.",
        f"{{I need to|Let me}} compute {a} {word} {b}.",
        f"{{Starting from|Taking}} {a} and {{applying|using}} {word} {b} gives {res}.",
        f"{{Let me double check|To check|Checking again}}: {a} {word} {b} is {res}.",
        "{There is no|I see no} trick {in the question|here}.",
    ]
    answer = [f"{{The answer is|So}} {expr} = {res}.", f"{a} {word} {b} {{equals|is}} {res}."]
    return work, answer


_KINDS: list[tuple[re.Pattern, list[str], list[str]]] = [
    (re.compile(r"capital", re.IGNORECASE),
     ["The user {wants|asks for} the capital {of a country|city}.",
      "{I recall|I remember} the capital from {geography|general knowledge}.",
      "{It is|That is} the seat of the {government|national government}.",
      "{I should|Let me} make sure {I do not|not to} confuse it with the largest city."],
     ["The capital {is the city I named|is as stated}.", "{It is|That is} also the seat of government."]),
    (re.compile(r"\b(poem|haiku|story|limerick|song|essay)\b", re.IGNORECASE),
     ["The user wants {topic}, {kept short|in a short form}.",
      "{I should|Let me} pick {an image|a picture} that fits {topic}.",
      "{The tone|The mood} should be {calm|warm|light}.",
      "{A clear structure|A simple shape} {will help|helps} the reader.",
      "{I will|Let me} keep the lines {short|simple}."],
     ["Here is a short piece about {topic}.", "{The lines|The words} {follow|trace} one calm image.",
      "{It ends|It closes} on a {quiet|gentle} note."]),
    (re.compile(r"\b(function|code|program|python|script|implement|algorithm)\b", re.IGNORECASE),
     ["The user wants code {for|that does} {topic}.",
      "{I should|Let me} define the {inputs|arguments} first.",
      "{A loop|A single pass} over the {input|data} {is enough|will do}.",
      "{Edge cases|Empty inputs} need {a check|care}.",
      "{The result|The return value} should be {simple|easy to test}."],
     ["Here is a {short|small} function for {topic}.", "{It handles|It checks} empty input first.",
      "{Then it|It then} makes one pass and returns the result."]),
    (re.compile(r"\b(why|how|explain|describe)\b", re.IGNORECASE),
     ["The user {asks|wants to know} {this|it}: {topic}.",
      "{The main cause|The key idea} {is worth|needs} stating first.",
      "{A simple example|An example} {will make|makes} it clear.",
      "{I should|Let me} mention {one detail|a detail} that people often miss.",
      "{The explanation|The answer} {should stay|can stay} short."],
     ["{In short|Briefly}, {topic} comes down to one main cause.",
      "{An example|A simple case} shows it clearly.", "{That is|This is} the core of it."]),
    (re.compile(r"\b(list|name|give me|examples?)\b", re.IGNORECASE),
     ["The user wants a list about {topic}.",
      "{Three|A few} {items|entries} {should be|are} enough.",
      "{Each item|Every entry} needs {a short|one} reason.",
      "{I should|Let me} order them {by importance|from most to least common}."],
     ["Here are {three|a few} items about {topic}.", "{First|To start}, the most common one.",
      "{Then|Next}, two more with {a reason each|short reasons}."]),
]

_DEFAULT_WORK = [
    "The user {asks|wants to know} about {topic}.",
    "{The main point|The key fact} {should come|comes} first.",
    "{A short example|An example} {would help|helps}.",
    "{I should|Let me} keep the answer {focused|short}.",
]
_DEFAULT_ANSWER = ["{Here is|This is} a short answer about {topic}.", "{The main point|The key fact} comes first.",
                   "{An example|A short example} makes it concrete."]

_CHECKS = [
    "{Let me|I should} {check|verify} {this|that} {again|once more}.",
    "{Nothing|No detail} {is missing|seems to be missing} {so far|yet}.",
    "{The wording|The phrasing} {of the question|of the request} is {clear|plain}.",
    "{I do not|I don't} {need|have} to {assume|guess} anything {else|more}.",
    "{This matches|That matches} what I {know|remember}.",
    "{The user|The question} {probably wants|likely wants} a {direct|clear} answer.",
    "{A short|A brief} answer {is best|works best} here.",
    "{There is|I see} no {reason|need} to {add|include} more detail.",
    "{Everything|It all} {fits|is consistent} {together|with the question}.",
    "{Now|Next} {I can|I will} {write|give} the answer.",
]


def plan_for(prompt: str, vocab: Vocab) -> Plan:
    """Build the plan for a prompt (chat-templated or raw); deterministic in the prompt text."""
    question = user_question(prompt)
    topic = _topic(question)
    m = _ARITH_RE.search(question)
    if m:
        work, answer = _arith(m)
    else:
        for pattern, w, a in _KINDS:
            if pattern.search(question):
                work, answer = list(w), list(a)
                break
        else:
            work, answer = list(_DEFAULT_WORK), list(_DEFAULT_ANSWER)
        work = [f"The user's question is {topic}."] + work
    h = zlib.crc32(question.encode())
    n_checks = 5 + h % 4
    start = (h >> 8) % len(_CHECKS)
    checks = [_CHECKS[(start + 3 * i) % len(_CHECKS)] for i in range(n_checks)]
    checks = list(dict.fromkeys(checks))
    reasoning = work[:-1] + checks + work[-1:] + ["{So|Therefore} I {can|will} answer {now|directly}."]
    safe_topic = topic.replace("{", "(").replace("}", ")")
    fill = [s.replace("{topic}", safe_topic) for s in reasoning]
    answer = [s.replace("{topic}", safe_topic) for s in answer]
    return Plan(
        reasoning=tuple(compile_sentence(s, vocab) for s in fill),
        close=compile_sentence("\n</think>\n\n", vocab),
        answer=tuple(compile_sentence(s, vocab) for s in answer),
    )
