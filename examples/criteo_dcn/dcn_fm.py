"""Deep & Cross with an FM term over Criteo's 13 counts and 26 categorical fields.

Written the way public CTR code writes such a model, not for heterps: per-field offsets
held in a numpy array, one embedding table shared by the FM term, the cross network and
the deep tower, `view` to flatten the fields, and four logits summed at the end (first
order, FM, cross + deep head, bias). heterps captures it with torch.export as it is.
"""

import numpy as np
import torch
from torch import nn


class CrossNetwork(nn.Module):
    """x_{l+1} = x_0 * (w_l . x_l) + b_l + x_l (Wang et al., 2017)."""

    def __init__(self, input_dim, num_layers):
        super().__init__()
        self.num_layers = num_layers
        self.w = nn.ModuleList(nn.Linear(input_dim, 1, bias=False) for _ in range(num_layers))
        self.b = nn.ParameterList(nn.Parameter(torch.zeros(input_dim)) for _ in range(num_layers))

    def forward(self, x0):
        x = x0
        for i in range(self.num_layers):
            x = x0 * self.w[i](x) + self.b[i] + x
        return x


class CriteoDeepCrossFM(nn.Module):
    def __init__(self, num_dense, field_dims, embed_dim, cross_layers, mlp_dims):
        super().__init__()
        self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)
        self.embedding = nn.Embedding(int(sum(field_dims)), embed_dim)  # shared by 3 branches
        self.first_order = nn.Embedding(int(sum(field_dims)), 1)
        self.bias = nn.Parameter(torch.zeros(1))
        self.dense_proj = nn.Linear(num_dense, embed_dim)
        self.num_fields = len(field_dims) + 1  # the projected counts count as one more field
        self.flat_dim = self.num_fields * embed_dim
        self.cross = CrossNetwork(self.flat_dim, cross_layers)
        layers, width = [], self.flat_dim
        for out in mlp_dims:
            layers += [nn.Linear(width, out), nn.ReLU()]
            width = out
        self.deep = nn.Sequential(*layers)
        self.head = nn.Linear(self.flat_dim + width, 1)

    def forward(self, dense, ids):
        ids = ids + torch.as_tensor(self.offsets, device=ids.device).unsqueeze(0)
        fields = torch.cat([self.dense_proj(dense).unsqueeze(1), self.embedding(ids)], dim=1)
        square_of_sum = fields.sum(dim=1) ** 2
        sum_of_square = (fields ** 2).sum(dim=1)
        fm = 0.5 * (square_of_sum - sum_of_square).sum(dim=1, keepdim=True)
        flat = fields.view(-1, self.flat_dim)
        both = torch.cat([self.cross(flat), self.deep(flat)], dim=1)
        logit = self.head(both) + fm + self.first_order(ids).sum(dim=1) + self.bias
        return logit.squeeze(1)
