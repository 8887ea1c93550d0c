"""One notebook that shows every labkit view, shared by the theme and the reopen tests.

Small enough to run in seconds on CPU: a two-layer MLP traced (graph, profile, memory),
fitted for one short epoch in the foreground (dashboard), compared by the optimize panel
(two recipes), and GAT attention on Zachary's karate club.
"""

from __future__ import annotations

SETUP = """\
import warnings
warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
import torch
from torch import nn
from torch.utils.data import TensorDataset
import labkit
from labkit.panels import AttentionView, OptimizePanel
from labkit.views import GraphView, MemoryTimeline, ProfileView
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
x = torch.randn(8, 16)
t = labkit.trace(model, x)
"""
FIT = """\
data = torch.randn(64, 16)
target = data[:, :4].argmax(1)
train, val = TensorDataset(data[:48], target[:48]), TensorDataset(data[48:], target[48:])
lab = labkit.Lab(model, (train, val),
                 loss=nn.functional.cross_entropy, batch_size=8, logdir="runs/views")
run = lab.fit(max_epochs=2)"""
OPTIMIZE = """\
from labkit.optimize import Recipe
panel = OptimizePanel(model.eval(), x, recipe=Recipe(channels_last=True), mode="inference",
                      steps=2, warmup=0, memory=False, drift=False)
panel.measure().join()
panel"""
ATTENTION = """\
from labkit.gnn import GAT, karate
data = karate()
AttentionView(GAT(data.num_features, 4, 4, heads=2, out_heads=2), data, node=0, hops=1)"""

CELLS = [
    SETUP,
    # a graph-break badge on the first Linear: its text must be legible in both themes
    "GraphView(t, height=420, breaks=[dict(reason='print()', module='0', module_type='Linear',"
    " source='m.py:1: print(x)', count=1)])",
    "ProfileView(t)",
    "MemoryTimeline(t)",
    FIT,
    OPTIMIZE,
    ATTENTION,
]
# cell index -> CSS class of the view's root in the output
VIEWS = {
    1: "lk-graph",
    2: "lk-profile",
    3: "lk-memory",
    4: "lk-dashboard",
    5: "lk-opt",
    6: "lk-attention",
}
