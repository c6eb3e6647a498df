"""Trigger tokens by reserved slots: a checkpoint switch writes embedding rows, never the vocabulary.

Adding a checkpoint's trigger to the tokenizer and removing it at the next switch (diffusers'
`load_textual_inversion` / `unload_textual_inversion`) rebuilds the tokenizer and re-allocates the
whole embedding table each time: about two seconds per switch on PQ-Nano's 30k-word vocabulary.
Instead a few placeholder tokens are added once; attaching a checkpoint copies its embeddings into
their rows, and the request's prompt has each trigger replaced by its placeholders. Without an
attached checkpoint nothing is replaced, so a trigger is tokenized exactly as the base model would.
"""

from __future__ import annotations

import torch

SLOT_COUNT = 16
_TEXT_COMPONENTS = (("tokenizer", "text_encoder"), ("tokenizer_2", "text_encoder_2"))


class TriggerSlots:
    """Placeholder tokens `<pq-slot-i>` in every tokenizer of a pipeline, and what they stand for now."""

    def __init__(self, pipe, count: int = SLOT_COUNT):
        self.tokens = [f"<pq-slot-{i}>" for i in range(count)]
        self._ids: dict[str, list[int]] = {}
        self._encoders: dict[str, torch.nn.Module] = {}
        for tokenizer_name, encoder_name in _TEXT_COMPONENTS:
            tokenizer, encoder = getattr(pipe, tokenizer_name, None), getattr(pipe, encoder_name, None)
            if tokenizer is None or encoder is None:
                continue
            table = encoder.get_input_embeddings().weight
            encoder.resize_token_embeddings(len(tokenizer) + count, mean_resizing=False)
            pipe.load_textual_inversion(
                [torch.zeros(1, table.shape[1], dtype=table.dtype) for _ in self.tokens],
                token=self.tokens, tokenizer=tokenizer, text_encoder=encoder,
            )
            self._ids[encoder_name] = tokenizer.convert_tokens_to_ids(self.tokens)
            self._encoders[encoder_name] = encoder
        self.active: dict[str, str] = {}  # trigger -> its placeholder text in encoder 1
        self._second_encoder = False

    def assign(self, embeddings: dict[str, torch.Tensor], embeddings_2: dict[str, torch.Tensor] | None = None) -> list[str]:
        """Point the slots at these triggers' embeddings ((n_vectors, hidden) each); return the triggers."""
        rows = {t: e.reshape(-1, e.shape[-1]) for t, e in embeddings.items()}
        needed = sum(r.shape[0] for r in rows.values())
        if needed > len(self.tokens):
            raise ValueError(f"the triggers need {needed} embedding vectors, more than the {len(self.tokens)} slots")
        self.active.clear()
        start = 0
        for (trigger, vectors) in rows.items():
            ids = slice(start, start + vectors.shape[0])
            self._write("text_encoder", ids, vectors)
            if embeddings_2 is not None:
                self._write("text_encoder_2", ids, embeddings_2[trigger].reshape(-1, embeddings_2[trigger].shape[-1]))
            self.active[trigger] = " ".join(self.tokens[ids])
            start += vectors.shape[0]
        self._second_encoder = embeddings_2 is not None
        return list(rows)

    def clear(self) -> None:
        self.active.clear()
        self._second_encoder = False

    def reset(self) -> None:
        """`clear`, and zero every slot row as when the slots were made: after a failed checkpoint its
        vectors (NaN, perhaps) stay nowhere in the base's embedding tables."""
        self.clear()
        with torch.no_grad():
            for encoder_name, encoder in self._encoders.items():
                encoder.get_input_embeddings().weight[self._ids[encoder_name]] = 0

    def rewrite(self, prompt: str) -> tuple[str, str]:
        """(prompt for encoder 1, prompt for encoder 2): active triggers replaced by their placeholders.

        Encoder 2 (SDXL) keeps the user's words unless the checkpoint brought embeddings for it too.
        """
        rewritten = prompt
        for trigger in sorted(self.active, key=len, reverse=True):
            rewritten = rewritten.replace(trigger, self.active[trigger])
        return rewritten, rewritten if self._second_encoder else prompt

    def _write(self, encoder_name: str, rows: slice, vectors: torch.Tensor) -> None:
        if encoder_name not in self._encoders:
            raise ValueError(f"the base model has no {encoder_name} for this embedding")
        table = self._encoders[encoder_name].get_input_embeddings().weight
        if vectors.shape[-1] != table.shape[1]:
            raise ValueError(f"embedding width {vectors.shape[-1]} does not match the {encoder_name}'s {table.shape[1]}")
        with torch.no_grad():
            table[self._ids[encoder_name][rows]] = vectors.to(table.device, table.dtype)
