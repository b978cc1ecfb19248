"""Character tokenizers with the official code's ids (docs/official-code.md §1).

Three vocabularies exist because the paper's parameter counts (Table 3) depend on the vocabulary
size: `pad` (19 ids: +, -, x, bitwise OR), `index` (121 ids: index hints) and `sort` (118 ids:
sorting). Ids 0..3 are [PAD], [UNK], [BOS], [EOS]; digits '0'..'9' are ids 4..13 in all three, which
is what the Abacus embedding keys on. A space is encoded as [PAD] (id 0), as in the official code,
so random padding (docs/official-code.md §2.3) is visible to the model but never a loss target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
DIGIT_IDS = range(4, 14)  # '0'..'9' in every vocabulary
FIRST_DIGIT_ID, LAST_DIGIT_ID = DIGIT_IDS.start, DIGIT_IDS.stop - 1

# The 102 hint symbols of the official generator, in order (docs/official-code.md §1.3): A-Z, a-z
# without 'x', 25 punctuation marks, 26 Greek letters.
HINT_SYMBOLS: tuple[str, ...] = tuple(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + "abcdefghijklmnopqrstuvwyz"
    + "!@£#$%^&*()~?.,<>{}[]:;/|"
    + "βΓΔδεζηθκΛλμΞξΠπΣςτΦφχΨψΩω"
)
assert len(HINT_SYMBOLS) == 102 and len(set(HINT_SYMBOLS)) == 102

ARITH_CHARS = "0123456789+-x= "  # ids 4..18; the space id (18) is never emitted
SORT_CHARS = "0123456789D,:= "  # ids 4..18 in the sort vocabulary
SORT_SEPARATORS = (",", ":", "=")
# Sorting labels: the hint symbols minus the separators, so a label never reads as a comma or colon
# (the official code allows that collision; docs/official-code.md §2.6). 'D' stays a label: it has
# its own id already.
SORT_LABELS: tuple[str, ...] = tuple(s for s in HINT_SYMBOLS if s not in SORT_SEPARATORS)


@dataclass(frozen=True)
class Tokenizer:
    """A character-level vocabulary: one character is one token, id = position in `chars` + 4."""

    name: str
    chars: tuple[str, ...]
    _ids: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = {c: i + len(SPECIALS) for i, c in enumerate(self.chars)}
        if len(ids) != len(self.chars):
            raise ValueError(f"tokenizer {self.name!r}: duplicate characters")
        ids[" "] = PAD  # a space is a pad token, as in the official tokenizer
        object.__setattr__(self, "_ids", ids)

    @property
    def vocab_size(self) -> int:
        """Number of embedding rows, the never-emitted space id included (official-code.md §1.1)."""
        return len(SPECIALS) + len(self.chars)

    @property
    def equals_id(self) -> int:
        return self._ids["="]

    def token_id(self, char: str) -> int:
        try:
            return self._ids[char]
        except KeyError:
            raise ValueError(f"character {char!r} is not in the {self.name!r} vocabulary") from None

    def encode(self, text: str, *, eos: bool = False) -> list[int]:
        """Ids of `text`; unknown characters raise (silently mapping them to [UNK] hides bugs)."""
        ids = [self.token_id(c) for c in text]
        if eos:
            ids.append(EOS)
        return ids

    def decode(self, ids) -> str:
        """Text of `ids`, stopping at the first [EOS]; [PAD]/[BOS]/[UNK] are dropped."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i < len(SPECIALS):
                continue
            if i >= self.vocab_size:
                raise ValueError(f"token id {i} is outside the {self.name!r} vocabulary "
                                 f"(size {self.vocab_size})")
            out.append(self.chars[i - len(SPECIALS)])
        return "".join(out)

    def id_to_char(self) -> list[str]:
        """Id -> printable character table ('' for specials), for fast vectorised decoding."""
        return ["", "", "", ""] + list(self.chars)


_TOKENIZERS = {
    "pad": Tokenizer("pad", tuple(ARITH_CHARS)),
    "index": Tokenizer("index", tuple(ARITH_CHARS) + HINT_SYMBOLS),
    "sort": Tokenizer("sort", tuple(SORT_CHARS) + tuple(s for s in HINT_SYMBOLS if s not in "D,:")),
}
assert _TOKENIZERS["pad"].vocab_size == 19
assert _TOKENIZERS["index"].vocab_size == 121
assert _TOKENIZERS["sort"].vocab_size == 118


def get_tokenizer(name: str) -> Tokenizer:
    """The `pad`, `index` or `sort` tokenizer."""
    try:
        return _TOKENIZERS[name]
    except KeyError:
        raise ValueError(f"tokenizer: unknown name {name!r}; "
                         f"choose one of {sorted(_TOKENIZERS)}") from None
