"""Word-level tokenizer of the simulated engine: text <-> token ids, readable both ways.

A token is a *piece* in the style of byte-level BPE: an optional leading space plus a run of letters/digits,
or an optional leading space plus one punctuation/symbol character, or a newline, or one of the special tokens
(``<think>``, ``</think>``, ``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``). Detokenizing is joining the
pieces, so every output detokenizes to readable English. The special tokens keep Qwen's ids (``<|im_end|>`` =
151645 is the end-of-sequence token); any other piece gets a stable id from a CRC of its text, so two sim
processes agree on ids. Piece counts are close to the token counts ``corpus/README.md`` defines for texts.
"""

from __future__ import annotations

import re
import zlib

ENDOFTEXT = 151643
IM_START = 151644
IM_END = 151645
THINK_OPEN = 151667
THINK_CLOSE = 151668
EOS_ID = IM_END

SPECIAL: dict[str, int] = {
    "<|endoftext|>": ENDOFTEXT,
    "<|im_start|>": IM_START,
    "<|im_end|>": IM_END,
    "<think>": THINK_OPEN,
    "</think>": THINK_CLOSE,
}

_PIECE_RE = re.compile(
    r"<\|endoftext\|>|<\|im_start\|>|<\|im_end\|>|<think>|</think>|\n| ?\w+| ?[^\w\s]|[^\S\n]"
)
_ID_BASE = 200_000
_ID_SPAN = 50_000_000


class Vocab:
    """Piece <-> id table. Ids of ordinary pieces are ``200000 + crc32(piece) % 5e7`` (collisions probe +1).

    One instance per process; it remembers every piece it has seen so that any id it handed out decodes.
    """

    def __init__(self) -> None:
        self._id_of: dict[str, int] = dict(SPECIAL)
        self._piece_of: dict[int, str] = {v: k for k, v in SPECIAL.items()}

    def id_of(self, piece: str) -> int:
        """The id of one piece (registering it on first sight)."""
        tid = self._id_of.get(piece)
        if tid is not None:
            return tid
        tid = _ID_BASE + zlib.crc32(piece.encode()) % _ID_SPAN
        while tid in self._piece_of:
            tid += 1
        self._id_of[piece] = tid
        self._piece_of[tid] = piece
        return tid

    def piece_of(self, tid: int) -> str:
        """The text of one id; unknown ids decode as ``<unk>``."""
        return self._piece_of.get(tid, "<unk>")

    def encode(self, text: str) -> list[int]:
        """Text -> ids, by :func:`split_pieces`."""
        return [self.id_of(p) for p in split_pieces(text)]

    def decode(self, ids) -> str:
        """Ids -> text (pieces joined)."""
        return "".join(self.piece_of(t) for t in ids)


def split_pieces(text: str) -> list[str]:
    """Split text into pieces (see the module docstring); joining the pieces gives the text back."""
    return _PIECE_RE.findall(text)
