"""Starting a run: check it, bind it, see that it fits, start torchrun, stop every process.

    prepare.py    plan + scenario + binding -> a checked RunSpec in a new run folder
    binding.py    resource type -> device, or an emulated slowdown
    capacity.py   will the ranks fit this machine (memory, GPU memory, cores)? before launch
    torchrun.py   start torchrun (with restarts) and wait, bounded
    proctree.py   every process of a run stops with the launcher; `python -m` entry for
                  torchrun and each rank
    dir_lock.py   one run per checkpoint directory
    bind_addr.py  several machines: the address this node listens on
"""
