"""The trainers' checkpoints: written by every rank, read as data only.

    dcp.py     torch.distributed.checkpoint folders per step and an atomic `latest` pointer;
               keys are the model's own parameter names, so any later plan loads them
    trust.py   what a checkpoint directory is trusted with: data, never code (a restricted
               unpickler for DCP's metadata, weights_only for values)

The parameter server's half of a step lives beside them (heterps_exec.ps.checkpoint).
"""
