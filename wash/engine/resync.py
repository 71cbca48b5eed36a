"""Context re-synchronisation: every member re-tokenises a finished routed span.

Every base model keeps its context in its OWN tokenisation (``members.py``: a
context with a KV cache that only ever advances by new ids; a model that sat out a
routed span catches up in one batched forward).

Re-synchronisation after a routed span: the span's bytes are re-tokenised by each
model's own tokenizer and each context becomes ``ids_before_span + T_m(span)``.
The common prefix with what a model already holds is kept (a specialist whose
tokenizer splits the word the same way loses nothing); only the differing tail is
cropped from its KV cache and fed again. The whole context is never re-encoded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from wash.engine.vocab import encode_bytes

if TYPE_CHECKING:
    from wash.engine.members import Member, MemberContext


def resynchronise(span: bytes, contexts: Mapping[str, "MemberContext"], starts: Mapping[str, int],
                  members: Mapping[str, "Member"]) -> dict[str, tuple[list[int], int]]:
    """Re-tokenise a finished span for every model.

    Returns, per model, the span's ids in that model's own tokenisation and how
    many ids the model held after the span start that had to be replaced.
    """
    out: dict[str, tuple[list[int], int]] = {}
    for name, ctx in contexts.items():
        ids = encode_bytes(span, members[name].encode, members[name].vocab)
        replaced = ctx.sync_to(ctx.ids[: starts[name]] + ids)
        out[name] = (ids, replaced)
    return out
