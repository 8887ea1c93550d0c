"""Lecture-style notebooks for promote (written into a folder by :func:`write_notebooks`).

Their code follows the patterns of public lecture notebooks: hand-written layer classes,
``%matplotlib inline``, plots, prints, a sample drawn with ``torch.multinomial`` between two
training cells, a loss shown as a cell's last expression; and of a nanoGPT-style
``train.py`` pasted into a notebook (module-level config, ``get_batch``,
``estimate_loss``, an AdamW loop, ``generate``). Sizes are tiny: each runs in seconds on a
CPU. They are saved without outputs, as a lecture's notebook is handed out.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

WORDS = (
    "emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily "
    "elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace chloe "
    "penelope layla riley zoey nora lily eleanor hannah lillian addison aubrey ellie stella"
)

IMPORTS = """%matplotlib inline
import random
import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt"""

HYPER = """# hyperparameters
max_steps = 60
batch_size = 16
n_embd = 4
n_hidden = 16
seed = 2147483647"""

VOCAB = """chars = sorted(set(''.join(words)))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi['.'] = 0
itos = {i: s for s, i in stoi.items()}
vocab_size = len(itos)
print(vocab_size)"""

DATASET = """block_size = 3

def build_dataset(words):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + '.':
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return torch.tensor(X), torch.tensor(Y)

random.seed(42)
random.shuffle(words)
n1 = int(0.8 * len(words))
Xtr, Ytr = build_dataset(words[:n1])
Xdev, Ydev = build_dataset(words[n1:])
Xtr.shape, Ydev.shape"""

LAYERS = """class Linear:
    def __init__(self, fan_in, fan_out, bias=True):
        self.weight = torch.randn((fan_in, fan_out), generator=g) / fan_in**0.5
        self.bias = torch.zeros(fan_out) if bias else None

    def __call__(self, x):
        self.out = x @ self.weight
        if self.bias is not None:
            self.out += self.bias
        return self.out

    def parameters(self):
        return [self.weight] + ([] if self.bias is None else [self.bias])


class BatchNorm1d:
    def __init__(self, dim, eps=1e-5, momentum=0.1):
        self.eps, self.momentum, self.training = eps, momentum, True
        self.gamma, self.beta = torch.ones(dim), torch.zeros(dim)
        self.running_mean, self.running_var = torch.zeros(dim), torch.ones(dim)

    def __call__(self, x):
        if self.training:
            xmean, xvar = x.mean(0, keepdim=True), x.var(0, keepdim=True)
        else:
            xmean, xvar = self.running_mean, self.running_var
        self.out = self.gamma * (x - xmean) / torch.sqrt(xvar + self.eps) + self.beta
        if self.training:
            with torch.no_grad():
                m = self.momentum
                self.running_mean = (1 - m) * self.running_mean + m * xmean
                self.running_var = (1 - m) * self.running_var + m * xvar
        return self.out

    def parameters(self):
        return [self.gamma, self.beta]


class Tanh:
    def __call__(self, x):
        self.out = torch.tanh(x)
        return self.out

    def parameters(self):
        return []"""

MODEL = """g = torch.Generator().manual_seed(seed)
C = torch.randn((vocab_size, n_embd), generator=g)
layers = [Linear(n_embd * block_size, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
          Linear(n_hidden, vocab_size)]
with torch.no_grad():
    layers[-1].weight *= 0.1
parameters = [C] + [p for layer in layers for p in layer.parameters()]
for p in parameters:
    p.requires_grad = True
sum(p.nelement() for p in parameters)"""

TRAIN = """lossi = []

def train(steps, lr):
    for i in range(steps):
        ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
        Xb, Yb = Xtr[ix], Ytr[ix]
        x = C[Xb].view(Xb.shape[0], -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        if i % 10 == 0:
            print(f'{i:7d}/{steps:7d}: {loss.item():.4f}')
        lossi.append(loss.log10().item())
    return loss

loss = train(max_steps // 2, 0.1)
loss"""

SAMPLE = """# a look at the model mid-training: sample one name
for layer in layers:
    layer.training = False
out, context = [], [0] * block_size
while True:
    x = C[torch.tensor([context])].view(1, -1)
    for layer in layers:
        x = layer(x)
    probs = F.softmax(x, dim=1)
    ix = torch.multinomial(probs, num_samples=1, generator=g).item()
    context = context[1:] + [ix]
    out.append(ix)
    if ix == 0 or len(out) > 20:
        break
print(''.join(itos[i] for i in out))
for layer in layers:
    layer.training = True"""

DEV = """@torch.no_grad()
def split_loss(X, Y):
    for layer in layers:
        layer.training = False
    x = C[X].view(X.shape[0], -1)
    for layer in layers:
        x = layer(x)
    return F.cross_entropy(x, Y).item()

dev_loss = split_loss(Xdev, Ydev)
dev_loss"""

MAKEMORE = [
    ("markdown", "# makemore, part 3: an MLP with hand-written layers"),
    ("code", IMPORTS),
    ("code", HYPER, "parameters"),
    ("code", f"words = {WORDS!r}.split()\nlen(words)"),
    ("code", VOCAB),
    ("code", DATASET),
    ("code", LAYERS),
    ("code", MODEL),
    ("code", TRAIN),
    ("code", SAMPLE),
    ("code", "loss = train(max_steps - max_steps // 2, 0.05)\nloss"),
    ("code", "plt.plot(lossi)\nplt.show()"),
    ("code", "plt.figure(figsize=(8, 2))\nplt.hist(layers[2].out.view(-1).tolist(), 20);"),
    ("code", DEV),
]

CONFIG = """# config, as train.py has it at module level
batch_size = 8
block_size = 8
max_iters = 40
eval_interval = 10
learning_rate = 1e-2
eval_iters = 4
device = 'cpu'"""

DATA = """torch.manual_seed(1337)
text = 'first citizen: before we proceed any further, hear me speak. all: speak, speak. ' * 8
chars = sorted(list(set(text)))
vocab_size = len(chars)
stoi = {ch: i for i, ch in enumerate(chars)}
itos = {i: ch for i, ch in enumerate(chars)}
encode = lambda s: [stoi[c] for c in s]
decode = lambda l: ''.join([itos[i] for i in l])
data = torch.tensor(encode(text), dtype=torch.long)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]"""

BATCHES = """def get_batch(split):
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])
    return x.to(device), y.to(device)

@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out"""

BIGRAM = """class BigramLanguageModel(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        logits = self.token_embedding_table(idx)
        if targets is None:
            return logits, None
        B, T, C = logits.shape
        logits = logits.view(B * T, C)
        loss = F.cross_entropy(logits, targets.view(B * T))
        return logits, loss

    def generate(self, idx, max_new_tokens):
        for _ in range(max_new_tokens):
            logits, _ = self(idx)
            probs = F.softmax(logits[:, -1, :], dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx

model = BigramLanguageModel(vocab_size).to(device)
model"""

LOOP = """optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
for iter in range(max_iters):
    if iter % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    xb, yb = get_batch('train')
    logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()"""

GENERATE = """context = torch.zeros((1, 1), dtype=torch.long)
print(decode(model.generate(context, max_new_tokens=30)[0].tolist()))"""

TRAIN_PY = [
    ("markdown", "# train.py, pasted into a notebook"),
    ("code", "import torch\nimport torch.nn as nn\nfrom torch.nn import functional as F"),
    ("code", CONFIG, "parameters"),
    ("code", DATA),
    ("code", BATCHES),
    ("code", BIGRAM),
    ("code", LOOP),
    ("code", GENERATE),
    ("code", "loss"),
]


def unseeded(cells: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The makemore notebook as first drafted: the word list is shuffled unseeded (Python's
    ``random`` seeds itself from the OS), so every run splits the data differently."""
    return [(kind, source.replace("random.seed(42)\n", ""), *rest) for kind, source, *rest in cells]


NOTEBOOKS = {
    "makemore_mlp.ipynb": MAKEMORE,
    "makemore_unseeded.ipynb": unseeded(MAKEMORE),
    "train_py_bigram.ipynb": TRAIN_PY,
}


def notebook(cells: list[tuple[str, ...]]) -> nbformat.NotebookNode:
    """An nbformat-4 notebook of ``(kind, source[, tag])`` cells, never run."""
    nb = nbformat.v4.new_notebook()
    for kind, source, *tags in cells:
        new = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        cell = new(source)
        if tags:
            cell.metadata["tags"] = list(tags)
        nb.cells.append(cell)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.validate(nb)
    return nb


def write_notebooks(folder: Path) -> dict[str, Path]:
    """Write every notebook of :data:`NOTEBOOKS` into ``folder``; returns name -> path."""
    out = {}
    for name, cells in NOTEBOOKS.items():
        path = folder / name
        path.write_text(nbformat.writes(notebook(cells)), encoding="utf-8")
        out[name] = path
    return out
