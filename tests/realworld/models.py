"""Patterns of real research code, small enough to run on a CPU in a test.

Each builder returns a :class:`Case`: the model, its inputs as the researcher would pass
them, the loss closure of their loop (capturing what real loops capture: targets, boolean
masks) and how they build their optimizer. The code is written the way it is pasted
into notebooks (nanoGPT's ``forward(idx, targets)`` returning ``(logits, loss)`` and its
``configure_optimizers``; Hugging Face models built from configs; PyG's example loop with
``data.train_mask``; a hand-written lecture model; a momentum encoder), not the way
labkit would like it.

Every builder is deterministic in ``seed``: building a case twice gives two equal,
independent twins (the reference that measuring must leave untouched).

Example:
    >>> case = build("gpt")
    >>> logits, loss = case.model(*case.args, **case.kwargs)
    >>> tuple(logits.shape), loss.dim()
    ((2, 8, 64), 0)
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------- the case


@dataclass
class Case:
    """A model, its inputs, the loop's loss closure and optimizer, as a researcher writes them.

    Args:
        name: The pattern's name.
        model: The model.
        args: Positional inputs of ``model``.
        kwargs: Keyword inputs of ``model``.
        loss: ``loss(output) -> scalar``, as the loop computes it.
        make_optimizer: ``model -> optimizer``, as the loop builds it (None: no optimizer).
        notes: What the pattern does that measuring must survive.
    """

    name: str
    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    loss: Callable[[Any], torch.Tensor] | None = None
    make_optimizer: Callable[[nn.Module], torch.optim.Optimizer] | None = None
    notes: str = ""

    def __repr__(self) -> str:
        return f"Case({self.name!r}, model={type(self.model).__name__})"

    def step(self, optimizer: torch.optim.Optimizer | None = None) -> Any:
        """One plain training step as the user's loop runs it; returns the output."""
        out = self.model(*self.args, **self.kwargs)
        value = self.loss(out) if self.loss is not None else out.sum()
        value.backward()
        if optimizer is not None:
            optimizer.step()
        return out


# ---------------------------------------------------------------------------- nanoGPT


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    dropout: float = 0.0
    bias: bool = True


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's has none before 2.1)."""

    def __init__(self, ndim: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's model: ``forward(idx, targets=None) -> (logits, loss)``, the head tied to the
    token embedding, ``configure_optimizers`` building AdamW decay / no-decay groups."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
        device = idx.device
        _, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def configure_optimizers(
        self,
        weight_decay: float,
        learning_rate: float,
        betas: tuple[float, float],
        device_type: str,
    ) -> torch.optim.Optimizer:
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)


def gpt(
    seed: int = 0,
    *,
    vocab: int = 64,
    batch: int = 2,
    block: int = 8,
    n_embd: int = 16,
    n_layer: int = 2,
    dropout: float = 0.0,
) -> Case:
    """nanoGPT: ``logits, loss = model(x, y); loss.backward()``; AdamW groups."""
    torch.manual_seed(seed)
    cfg = GPTConfig(
        block_size=block,
        vocab_size=vocab,
        n_layer=n_layer,
        n_head=2,
        n_embd=n_embd,
        dropout=dropout,
    )
    model = GPT(cfg)
    x = torch.randint(0, vocab, (batch, block))
    y = torch.randint(0, vocab, (batch, block))
    return Case(
        "gpt",
        model,
        (x, y),
        loss=lambda out: out[1],
        make_optimizer=lambda m: m.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu"),
        notes="forward returns (logits, loss); the logits stay alive through backward",
    )


# ---------------------------------------------------------------------------- Hugging Face


def _adamw(m: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(m.parameters(), lr=5e-5, weight_decay=0.01)


def hf_llama(seed: int = 0, *, batch: int = 2, seq: int = 8) -> Case:
    """A tiny ``LlamaForCausalLM`` from a config: ``model(input_ids=..., labels=...).loss``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = LlamaForCausalLM(cfg)
    ids = torch.randint(0, 64, (batch, seq))
    return Case(
        "hf_llama",
        model,
        (),
        {"input_ids": ids, "labels": ids.clone()},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
    )


def hf_t5(seed: int = 0, *, batch: int = 2, seq: int = 8) -> Case:
    """A tiny ``T5ForConditionalGeneration``: encoder-decoder, relative position buckets."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    cfg = T5Config(
        vocab_size=64,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        decoder_start_token_id=0,
        pad_token_id=0,
        dropout_rate=0.1,
    )
    model = T5ForConditionalGeneration(cfg)
    ids = torch.randint(1, 64, (batch, seq))
    labels = torch.randint(1, 64, (batch, seq))
    return Case(
        "hf_t5",
        model,
        (),
        {"input_ids": ids, "labels": labels},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
        notes="dropout 0.1: the RNG must come back as it was",
    )


def hf_vit(
    seed: int = 0, *, batch: int = 2, image: int = 16, hidden: int = 16, layers: int = 1
) -> Case:
    """A tiny ``ViTForImageClassification``: ``model(pixel_values=..., labels=...).loss``."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(seed)
    cfg = ViTConfig(
        image_size=image,
        patch_size=4,
        num_channels=3,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        num_labels=3,
        attn_implementation="eager",
    )
    model = ViTForImageClassification(cfg)
    px = torch.randn(batch, 3, image, image)
    labels = torch.randint(0, 3, (batch,))
    return Case(
        "hf_vit",
        model,
        (),
        {"pixel_values": px, "labels": labels},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
    )


def hf_bert(seed: int = 0, *, batch: int = 2, seq: int = 8) -> Case:
    """A tiny ``BertForSequenceClassification`` with an attention mask and dropout."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
    )
    model = BertForSequenceClassification(cfg)
    ids = torch.randint(0, 64, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, -2:] = 0
    labels = torch.randint(0, 3, (batch,))
    return Case(
        "hf_bert",
        model,
        (),
        {"input_ids": ids, "attention_mask": mask, "labels": labels},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
    )


# ---------------------------------------------------------------------------- PyG examples


def hf_wav2vec2_ctc(seed: int = 0, *, batch: int = 2, samples: int = 1600) -> Case:
    """A tiny ``Wav2Vec2ForCTC``: a speech model whose loss is CTC over labels padded with
    -100 (the targets masked out of them, the lengths summed from the mask)."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    torch.manual_seed(seed)
    cfg = Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        vocab_size=12,
        do_stable_layer_norm=True,
        feat_extract_norm="layer",
        mask_time_prob=0.0,
        layerdrop=0.0,
    )
    model = Wav2Vec2ForCTC(cfg)
    audio = torch.randn(batch, samples)
    labels = torch.randint(1, 12, (batch, 5))
    labels[1:, 2:] = -100  # shorter transcripts padded
    return Case(
        "hf_wav2vec2_ctc",
        model,
        (),
        {"input_values": audio, "labels": labels},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
        notes="CTC: log_alpha's shape depends on the label lengths' values",
    )


def hf_gpt2(seed: int = 0, *, batch: int = 2, seq: int = 8) -> Case:
    """A tiny ``GPT2LMHeadModel``: Conv1D layers, a tied head, dropout 0.1 everywhere."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=64,
        n_positions=32,
        n_embd=16,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(cfg)
    ids = torch.randint(0, 64, (batch, seq))
    return Case(
        "hf_gpt2",
        model,
        (),
        {"input_ids": ids, "labels": ids.clone()},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
        notes="dropout 0.1: the RNG must come back as it was",
    )


def hf_bart(seed: int = 0, *, batch: int = 2, seq: int = 8) -> Case:
    """A tiny ``BartForConditionalGeneration``: decoder inputs shifted from the labels."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(seed)
    cfg = BartConfig(
        vocab_size=64,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = BartForConditionalGeneration(cfg)
    ids = torch.randint(4, 64, (batch, seq))
    labels = torch.randint(4, 64, (batch, seq - 2))
    return Case(
        "hf_bart",
        model,
        (),
        {"input_ids": ids, "labels": labels},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
    )


def hf_swin(seed: int = 0, *, batch: int = 2, image: int = 16) -> Case:
    """A tiny ``SwinForImageClassification``: shifted windows, patch merging, drop path.
    Its patch embedding is ``flatten(2).transpose(1, 2)`` into a LayerNorm (the plan read
    2,048 B high before the layer-norm gradient's layout rule)."""
    from transformers import SwinConfig, SwinForImageClassification

    torch.manual_seed(seed)
    cfg = SwinConfig(
        image_size=image,
        patch_size=2,
        num_channels=3,
        embed_dim=8,
        depths=[1, 1],
        num_heads=[1, 2],
        window_size=2,
        num_labels=3,
    )
    model = SwinForImageClassification(cfg)
    px = torch.randn(batch, 3, image, image)
    labels = torch.randint(0, 3, (batch,))
    return Case(
        "hf_swin",
        model,
        (),
        {"pixel_values": px, "labels": labels},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
        notes="drop path 0.1: the RNG must come back as it was",
    )


def hf_mistral(seed: int = 0, *, batch: int = 2, seq: int = 8) -> Case:
    """A tiny ``MistralForCausalLM``: grouped-query attention and a sliding window shorter
    than the sequence."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    cfg = MistralConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=4,
        max_position_embeddings=32,
        sliding_window=4,
        attn_implementation="eager",
    )
    model = MistralForCausalLM(cfg)
    ids = torch.randint(0, 64, (batch, seq))
    return Case(
        "hf_mistral",
        model,
        (),
        {"input_ids": ids, "labels": ids.clone()},
        loss=lambda out: out.loss,
        make_optimizer=_adamw,
    )


def _pyg_nn() -> Any:
    """``torch_geometric.nn``, imported with PyG 2.8's import-time ``torch.jit.script``
    DeprecationWarning (under torch 2.13) allowed; every other warning stays an error."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
        import torch_geometric.datasets
        import torch_geometric.nn

    return torch_geometric


class GCN(nn.Module):
    """PyG's ``examples/gcn.py`` model."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int) -> None:
        super().__init__()
        GCNConv = _pyg_nn().nn.GCNConv
        self.conv1 = GCNConv(in_channels, hidden, cached=False)
        self.conv2 = GCNConv(hidden, out_channels, cached=False)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, edge_index)


class GAT(nn.Module):
    """PyG's ``examples/gat.py`` model."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, heads: int) -> None:
        super().__init__()
        GATConv = _pyg_nn().nn.GATConv
        self.conv1 = GATConv(in_channels, hidden, heads, dropout=0.6)
        self.conv2 = GATConv(hidden * heads, out_channels, heads=1, concat=False, dropout=0.6)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        return self.conv2(x, edge_index)


def _graph(fake_nodes: int | None, seed: int) -> Any:
    if fake_nodes is None:
        return _pyg_nn().datasets.KarateClub()[0]
    _pyg_nn()  # PyG imported once with its import-time warning allowed
    from labkit.gnn.datasets import fake

    return fake(fake_nodes, 4, seed=seed, num_features=32)


def _pyg(name: str, model: nn.Module, data: Any) -> Case:
    # the PyG example loop: the masks are captured from the notebook, not passed in
    def loss(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out[data.train_mask], data.y[data.train_mask])

    return Case(
        name,
        model,
        (data.x, data.edge_index),
        loss=loss,
        make_optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=0.005, weight_decay=5e-4),
        notes="the loss indexes with a boolean train mask captured from the notebook",
    )


def pyg_gcn(seed: int = 0, *, nodes: int | None = None, hidden: int = 16) -> Case:
    """GCN on KarateClub (or a FakeDataset graph of about ``nodes`` nodes)."""
    data = _graph(nodes, seed)
    torch.manual_seed(seed)
    classes = int(data.y.max()) + 1
    return _pyg("pyg_gcn", GCN(data.num_features, hidden, classes), data)


def pyg_gat(seed: int = 0, *, nodes: int | None = None, hidden: int = 8, heads: int = 8) -> Case:
    """GAT on KarateClub (or a FakeDataset graph of about ``nodes`` nodes)."""
    data = _graph(nodes, seed)
    torch.manual_seed(seed)
    classes = int(data.y.max()) + 1
    return _pyg("pyg_gat", GAT(data.num_features, hidden, classes, heads), data)


class SAGE(nn.Module):
    """PyG's ``examples/graph_sage_unsup.py``-style GraphSAGE, full batch: a mean-aggregating
    layer, then a max-aggregating one (``scatter_reduce`` with ``amax``)."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int) -> None:
        super().__init__()
        SAGEConv = _pyg_nn().nn.SAGEConv
        self.conv1 = SAGEConv(in_channels, hidden, aggr="mean")
        self.conv2 = SAGEConv(hidden, out_channels, aggr="max")

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, edge_index)


def pyg_sage(seed: int = 0, *, nodes: int | None = None, hidden: int = 16) -> Case:
    """GraphSAGE (mean, then max aggregation) on KarateClub (or a FakeDataset graph)."""
    data = _graph(nodes, seed)
    torch.manual_seed(seed)
    classes = int(data.y.max()) + 1
    return _pyg("pyg_sage", SAGE(data.num_features, hidden, classes), data)


def _graphs(seed: int, graphs: int, nodes: int, channels: int, edge_dim: int = 0) -> Any:
    """A mini-batch of ``graphs`` FakeDataset graphs (graph labels among 3 classes)."""
    pyg = _pyg_nn()
    from torch_geometric.data import Batch

    state = random.getstate()  # FakeDataset draws each graph's node count with Python's random
    try:
        random.seed(seed)
        torch.manual_seed(seed)
        ds = pyg.datasets.FakeDataset(
            num_graphs=graphs,
            avg_num_nodes=nodes,
            avg_degree=3,
            num_channels=channels,
            edge_dim=edge_dim,
            num_classes=3,
            task="graph",
        )
        return Batch.from_data_list(list(ds))
    finally:
        random.setstate(state)


def _graph_case(name: str, model: nn.Module, args: tuple[Any, ...], y: torch.Tensor) -> Case:
    # the graph-classification loop: one label a graph, captured from the loader's batch
    def loss(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out, y)

    return Case(
        name,
        model,
        args,
        loss=loss,
        make_optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=0.01),
        notes="graph classification: a batch vector assigns nodes to graphs, pooled per graph",
    )


class GIN(nn.Module):
    """PyG's ``examples/mutag_gin.py`` model: GINConv layers over BatchNorm MLPs, then
    ``global_add_pool`` over the batch vector and a classifier."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, layers: int) -> None:
        super().__init__()
        pyg = _pyg_nn().nn
        self.convs = nn.ModuleList()
        for i in range(layers):
            mlp = nn.Sequential(
                nn.Linear(in_channels if i == 0 else hidden, hidden),
                nn.BatchNorm1d(hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
            )
            self.convs.append(pyg.GINConv(mlp, train_eps=True))
        self.pool = pyg.global_add_pool
        self.head = nn.Sequential(
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out_channels)
        )

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor
    ) -> torch.Tensor:
        for conv in self.convs:
            x = conv(x, edge_index).relu()
        x = self.pool(x, batch)
        return self.head(F.dropout(x, p=0.5, training=self.training))


def pyg_gin(seed: int = 0, *, graphs: int = 6, nodes: int = 12, hidden: int = 16) -> Case:
    """GIN with BatchNorm MLPs and global_add_pool over a batch of ``graphs`` graphs."""
    data = _graphs(seed, graphs, nodes, 8)
    torch.manual_seed(seed)
    model = GIN(8, hidden, 3, layers=2)
    return _graph_case("pyg_gin", model, (data.x, data.edge_index, data.batch), data.y.clone())


class GraphTransformer(nn.Module):
    """TransformerConv layers with edge features (``edge_dim``), then global attention
    pooling (``AttentionalAggregation``) over the batch vector."""

    def __init__(
        self, in_channels: int, hidden: int, out_channels: int, heads: int, edge_dim: int
    ) -> None:
        super().__init__()
        pyg = _pyg_nn().nn
        TransformerConv = pyg.TransformerConv
        self.conv1 = TransformerConv(in_channels, hidden, heads, edge_dim=edge_dim, dropout=0.1)
        self.conv2 = TransformerConv(hidden * heads, hidden, 1, edge_dim=edge_dim, beta=True)
        self.pool = pyg.AttentionalAggregation(nn.Linear(hidden, 1))
        self.head = nn.Linear(hidden, out_channels)

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        batch: torch.Tensor,
        edge_attr: torch.Tensor,
    ) -> torch.Tensor:
        x = self.conv1(x, edge_index, edge_attr).relu()
        x = self.conv2(x, edge_index, edge_attr).relu()
        return self.head(self.pool(x, batch))


def pyg_transformer(
    seed: int = 0, *, graphs: int = 6, nodes: int = 12, hidden: int = 8, heads: int = 2
) -> Case:
    """TransformerConv (edge_dim) + attention pooling over a batch of ``graphs`` graphs."""
    data = _graphs(seed, graphs, nodes, 8, edge_dim=4)
    torch.manual_seed(seed)
    model = GraphTransformer(8, hidden, 3, heads, edge_dim=4)
    args = (data.x, data.edge_index, data.batch, data.edge_attr)
    return _graph_case("pyg_transformer", model, args, data.y.clone())


# ---------------------------------------------------------------------------- MLP-mixer


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, channels: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(channels)
        self.token_mix = nn.Sequential(
            nn.Linear(tokens, tokens), nn.GELU(), nn.Linear(tokens, tokens)
        )
        self.norm2 = nn.LayerNorm(channels)
        self.channel_mix = nn.Sequential(
            nn.Linear(channels, channels), nn.GELU(), nn.Linear(channels, channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mix(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mix(self.norm2(x))


class Mixer(nn.Module):
    """An MLP-mixer of many small blocks (many module calls of a few microseconds each)."""

    def __init__(
        self, blocks: int = 40, tokens: int = 16, channels: int = 64, classes: int = 10
    ) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(MixerBlock(tokens, channels) for _ in range(blocks)))
        self.norm = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(x)).mean(1))


def mixer(
    seed: int = 0, *, blocks: int = 40, tokens: int = 4, channels: int = 8, batch: int = 2
) -> Case:
    """A 40-block MLP-mixer with small layers (the benchmark's size: tokens=16, channels=64,
    batch=32)."""
    torch.manual_seed(seed)
    model = Mixer(blocks, tokens, channels)
    x = torch.randn(batch, tokens, channels)
    y = torch.randint(0, 10, (batch,))
    return Case(
        "mixer",
        model,
        (x,),
        loss=lambda out: F.cross_entropy(out, y),
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
    )


# ---------------------------------------------------------------------------- lecture model


class HandLinear(nn.Module):
    """A lecture's Linear: weights drawn by hand, ``x @ W + b``."""

    def __init__(self, fan_in: int, fan_out: int, bias: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(fan_in, fan_out) / fan_in**0.5)
        self.bias = nn.Parameter(torch.zeros(fan_out)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x @ self.weight
        return out + self.bias if self.bias is not None else out


class HandBatchNorm1d(nn.Module):
    """A lecture's BatchNorm: running statistics updated by hand, a Python step counter."""

    def __init__(self, dim: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))
        self.calls = 0  # a Python counter: nothing labkit can put back

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            xmean, xvar = x.mean(0, keepdim=True), x.var(0, keepdim=True)
            with torch.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
            self.calls += 1
        else:
            xmean, xvar = self.running_mean, self.running_var
        return self.gamma * (x - xmean) / torch.sqrt(xvar + self.eps) + self.beta


class Lecture(nn.Module):
    """makemore-style MLP: an embedding table, hand-written layers in a Python list."""

    def __init__(self, vocab: int = 27, block: int = 3, emb: int = 4, hidden: int = 32) -> None:
        super().__init__()
        self.C = nn.Parameter(torch.randn(vocab, emb))
        layers = [
            HandLinear(block * emb, hidden, bias=False),
            HandBatchNorm1d(hidden),
            nn.Tanh(),
            HandLinear(hidden, vocab),
        ]
        self.layers = nn.ModuleList(layers)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        x = self.C[X].view(X.shape[0], -1)
        for layer in self.layers:
            x = layer(x)
        return x


def lecture(seed: int = 0, *, batch: int = 8) -> Case:
    """The lecture model: ``F.cross_entropy(model(Xb), Yb)``, a hand-run SGD-like optimizer."""
    torch.manual_seed(seed)
    model = Lecture()
    X = torch.randint(0, 27, (batch, 3))
    Y = torch.randint(0, 27, (batch,))
    return Case(
        "lecture",
        model,
        (X,),
        loss=lambda out: F.cross_entropy(out, Y),
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
        notes="reassigns its running buffers; counts calls in a Python int",
    )


# ---------------------------------------------------------------------------- state in forward


class MomentumEncoder(nn.Module):
    """MoCo/BYOL-style: the key encoder follows the query encoder by EMA inside forward."""

    def __init__(self, d: int = 8, m: float = 0.99) -> None:
        super().__init__()
        self.query = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.key = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        for pk, pq in zip(self.key.parameters(), self.query.parameters(), strict=True):
            pk.data.copy_(pq.data)
            pk.requires_grad = False
        self.m = m
        self.register_buffer("queue", torch.randn(16, d))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        q = F.normalize(self.query(x1), dim=1)
        with torch.no_grad():
            for pk, pq in zip(self.key.parameters(), self.query.parameters(), strict=True):
                pk.data = pk.data * self.m + pq.data * (1.0 - self.m)
            k = F.normalize(self.key(x2), dim=1)
        l_neg = q @ self.queue.clone().detach().T
        logits = torch.cat([(q * k).sum(1, keepdim=True), l_neg], dim=1) / 0.07
        with torch.no_grad():  # enqueue the keys
            n = k.shape[0]
            p = int(self.ptr)
            self.queue[p : p + n] = k
            self.ptr.fill_((p + n) % self.queue.shape[0])
        return logits


def momentum(seed: int = 0, *, batch: int = 4) -> Case:
    """A momentum encoder: EMA of parameters and a key queue, updated in forward."""
    torch.manual_seed(seed)
    model = MomentumEncoder()
    x1, x2 = torch.randn(batch, 8), torch.randn(batch, 8)
    labels = torch.zeros(batch, dtype=torch.long)
    return Case(
        "momentum",
        model,
        (x1, x2),
        loss=lambda out: F.cross_entropy(out, labels),
        make_optimizer=lambda m: torch.optim.SGD(
            [p for p in m.parameters() if p.requires_grad], lr=0.03, momentum=0.9
        ),
    )


class InplaceInput(nn.Module):
    """Adds to its input in place (``x.add_(1)``) before using it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return self.fc(x)


def inplace_input(seed: int = 0) -> Case:
    torch.manual_seed(seed)
    return Case(
        "inplace_input",
        InplaceInput(),
        (torch.randn(3, 4),),
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
    )


def saliency(seed: int = 0) -> Case:
    """An input that requires grad (saliency maps, adversarial examples read ``x.grad``)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = torch.randn(3, 4, requires_grad=True)
    return Case("saliency", model, (x,), loss=lambda out: out[:, 0].sum())


class Counter(nn.Module):
    """Reassigns a buffer in forward (``self.steps = self.steps + 1``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps = self.steps + 1
        return self.fc(x)


def buffer_reassign(seed: int = 0) -> Case:
    torch.manual_seed(seed)
    return Case(
        "buffer_reassign",
        Counter(),
        (torch.randn(3, 4),),
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
    )


class ExpandedBias(nn.Module):
    """A bias table kept as an ``expand``ed buffer (stride 0: one row seen by every
    position), as position tables and relative-position biases are often registered; its
    elements share memory, so ``copy_`` into it is refused."""

    def __init__(self, seq: int = 3, dim: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.register_buffer("bias", torch.randn(dim).expand(seq, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + self.bias


def expanded_buffer(seed: int = 0) -> Case:
    torch.manual_seed(seed)
    return Case(
        "expanded_buffer",
        ExpandedBias(),
        (torch.randn(2, 3, 4),),
        make_optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
    )


def bn_dropout(seed: int = 0, *, batch: int = 4) -> Case:
    """Convolutions with BatchNorm and Dropout: running statistics, the RNG."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 3),
    )
    x = torch.randn(batch, 3, 6, 6)
    y = torch.randint(0, 3, (batch,))
    return Case(
        "bn_dropout",
        model,
        (x,),
        loss=lambda out: F.cross_entropy(out, y),
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
    )


# ---------------------------------------------------------------------------- registry

BUILDERS: dict[str, Callable[..., Case]] = {
    "gpt": gpt,
    "hf_llama": hf_llama,
    "hf_t5": hf_t5,
    "hf_vit": hf_vit,
    "hf_bert": hf_bert,
    "hf_wav2vec2_ctc": hf_wav2vec2_ctc,
    "hf_gpt2": hf_gpt2,
    "hf_bart": hf_bart,
    "hf_swin": hf_swin,
    "hf_mistral": hf_mistral,
    "pyg_gcn": pyg_gcn,
    "pyg_gat": pyg_gat,
    "pyg_sage": pyg_sage,
    "pyg_gin": pyg_gin,
    "pyg_transformer": pyg_transformer,
    "mixer": mixer,
    "lecture": lecture,
    "momentum": momentum,
    "inplace_input": inplace_input,
    "saliency": saliency,
    "buffer_reassign": buffer_reassign,
    "bn_dropout": bn_dropout,
    "expanded_buffer": expanded_buffer,
}


def build(name: str, seed: int = 0, **options: Any) -> Case:
    """The case ``name`` built with ``seed``: the same seed gives an equal, independent twin.

    The global RNG is left as it was (the builders seed it for their weights).
    """
    with torch.random.fork_rng(devices=[]):
        return BUILDERS[name](seed, **options)
