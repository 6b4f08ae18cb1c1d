"""PairRM's network (DeBERTa-v2 backbone + llm-blender's head) and, for inference, DeBERTa-v3's disentangled attention
with transformers' arithmetic but fewer L×L passes (`install_fast_attention`), which on CPU cost as much as the
matmuls: gather indices built once per model (a shorter batch takes the top-left block), the 1/√(3d) scale applied to
the L×2k scores before the gather, a key-padding mask (none without padding) for the [b, 1, L, L] one, q/k/v views."""

from __future__ import annotations

import functools
import types
from typing import Any

import torch
from torch import nn


class PairRMModel(nn.Module):
    """DeBERTa-v2 backbone + llm-blender's head; state-dict keys `pretrained_model.*` and `head_layer.*`."""

    def __init__(self, config, n_tasks: int = 1, drop_out: float = 0.05):
        super().__init__()
        from transformers import DebertaV2Model  # keeps transformers off `repro score --help`

        hidden = config.hidden_size
        self.pretrained_model = DebertaV2Model(config)
        self.head_layer = nn.Sequential(nn.Dropout(drop_out), nn.Linear(2 * hidden, hidden), nn.Tanh(),
                                        nn.Dropout(drop_out), nn.Linear(hidden, n_tasks))
        self.fast_attention = False
        self.batch: dict[str, Any] = {}  # per forward: what every layer's fast attention shares
        self.positions: dict[str, torch.Tensor] = {}  # the gather indices of the longest batch so far

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                prefix_positions: torch.Tensor) -> torch.Tensor:
        """pair_logits [batch]: head(source, candidate1) − head(source, candidate2), averaged over tasks."""
        if self.fast_attention:
            self.batch = self.batch_context(attention_mask)
        try:
            hidden = self.pretrained_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        finally:
            self.batch = {}
        rows = torch.arange(hidden.shape[0], device=hidden.device)[:, None]
        source, cand1, cand2 = hidden[rows, prefix_positions].unbind(1)
        left = self.head_layer(torch.cat([source, cand1], dim=-1))
        right = self.head_layer(torch.cat([source, cand2], dim=-1))
        return (left - right).mean(dim=-1)

    def batch_context(self, attention_mask: torch.Tensor) -> dict[str, Any]:
        """What every layer's attention in one forward shares: the gather indices and the key-padding mask."""
        # keeps transformers off `repro score --help`
        from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

        length, encoder = attention_mask.shape[1], self.pretrained_model.encoder
        known = self.positions.get("c2p_index")
        if known is None or known.shape[0] < length or known.device != attention_mask.device:
            probe = attention_mask.new_empty((1, length, 1), dtype=torch.float32)
            relative_pos = build_relative_position(probe, probe, bucket_size=encoder.position_buckets,
                                                   max_position=encoder.max_relative_positions)[0]
            span = encoder.position_buckets
            self.positions = {"c2p_index": torch.clamp(relative_pos + span, 0, 2 * span - 1),
                              "p2c_index": torch.clamp(-relative_pos + span, 0, 2 * span - 1)}
        return {**{k: v[:length, :length] for k, v in self.positions.items()},
                "key_padding": None if bool(attention_mask.all()) else ~attention_mask.bool()}


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[b, L, h*d] -> [b, h, L, d], a view."""
    return x.view(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def projections(attention, hidden_states) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Query, key and value [b, h, L, d] (views), and transformers' scale: √(3d) in fp32, cast to the model dtype."""
    query, key, value = (_split_heads(proj(hidden_states), attention.num_attention_heads)
                         for proj in (attention.query_proj, attention.key_proj, attention.value_proj))
    scale = torch.sqrt(torch.tensor(query.shape[-1] * 3, dtype=torch.float)).to(dtype=hidden_states.dtype)
    return query, key, value, scale


def position_scores(attention, query, key, rel_embeddings, scale, batch) -> torch.Tensor:
    """DeBERTa's content->position plus position->content scores, divided by `scale`: [b, h, L, L]."""
    (b, heads, length, _), span = query.shape, attention.pos_ebd_size
    rel = rel_embeddings[: 2 * span, :].unsqueeze(0)
    pos_key, pos_query = (_split_heads(proj(rel), heads) for proj in (attention.key_proj, attention.query_proj))
    c2p = torch.matmul(query, pos_key.transpose(-1, -2)) / scale  # [b, h, L, 2k]
    c2p = torch.gather(c2p, -1, batch["c2p_index"].expand(b, heads, length, length))
    p2c = torch.matmul(key, pos_query.transpose(-1, -2)) / scale
    c2p += torch.gather(p2c, -1, batch["p2c_index"].expand(b, heads, length, length)).transpose(-1, -2)
    return c2p


def _fast_attention_forward(self, hidden_states, attention_mask, output_attentions=False, query_states=None,
                            relative_pos=None, rel_embeddings=None, *, owner: PairRMModel):
    batch, dtype = owner.batch, hidden_states.dtype
    query, key, value, scale = projections(self, hidden_states)
    c2p = position_scores(self, query, key, rel_embeddings, scale, batch)
    # in place, at most three L×L tensors at a time; the same sums as transformers' qk + (c2p + p2c)
    scores = torch.matmul(query, key.transpose(-1, -2) / scale)
    scores += c2p
    del c2p
    if batch["key_padding"] is not None:
        scores.masked_fill_(batch["key_padding"][:, None, None, :], torch.finfo(dtype).min)
    probs = torch.softmax(scores, dim=-1)
    del scores
    context = torch.matmul(probs, value).transpose(1, 2)
    return context.reshape(context.shape[0], context.shape[1], -1), None


def install_fast_attention(model: PairRMModel) -> None:
    """Route the backbone's attention through `_fast_attention_forward` (DeBERTa-v3's settings only)."""
    # keeps transformers off `repro score --help`
    from transformers.models.deberta_v2.modeling_deberta_v2 import DisentangledSelfAttention

    config = model.pretrained_model.config
    encoder = model.pretrained_model.encoder
    if not (getattr(config, "relative_attention", False) and getattr(config, "share_att_key", False)
            and set(config.pos_att_type or []) == {"c2p", "p2c"} and getattr(config, "position_buckets", -1) > 0
            and "layer_norm" in encoder.norm_rel_ebd and encoder.conv is None):
        return
    for module in model.pretrained_model.modules():
        if isinstance(module, DisentangledSelfAttention):
            module.forward = types.MethodType(functools.partial(_fast_attention_forward, owner=model), module)
    # the [b, 1, L, L] mask and per-forward relative positions are not needed by the fast attention
    encoder.get_attention_mask = lambda attention_mask: attention_mask
    encoder.get_rel_pos = lambda hidden_states, query_states=None, relative_pos=None: None
    model.fast_attention = True
