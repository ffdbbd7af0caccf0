"""labsync.py — wait until the node agents of a lab enforce the latest state.

The lab's agents (`zerohop lab up`, mesh on, BPF mode) load NetworkPolicy
themselves on every state change: `zerohop apply` writes the state source,
each agent syncs its policy tables first and then records the state
generation it synced in its pinned LB metadata (`zerohop get stats`:
`generation`). So "every agent's generation >= the state source's
generation" means the policy of that state is in force on every node.
"""
import json
import subprocess
import time


def state_generation(lab):
    """The state source's change counter (/run/zerohop/LAB/state/generation)."""
    with open(f"/run/zerohop/{lab}/state/generation") as f:
        return int(f.read().split()[0])


def wait_agents(zh, lab, nodes=2, gen=None, timeout=5.0):
    """Block until each of the lab's `nodes` agents has synced state
    generation `gen` (default: the current one). Raises RuntimeError naming
    the lagging nodes after `timeout` seconds."""
    if gen is None:
        gen = state_generation(lab)
    end = time.monotonic() + timeout
    seen = {}
    while True:
        r = subprocess.run([zh, "get", "stats", "--lab", lab, "-o", "json"],
                           capture_output=True, text=True)
        try:
            seen = {n: v.get("generation", 0) for n, v in json.loads(r.stdout).items()}
        except ValueError:
            seen = {}
        if len(seen) >= nodes and all(g >= gen for g in seen.values()):
            return gen
        if time.monotonic() > end:
            raise RuntimeError(f"lab {lab}: agents did not sync state generation {gen} "
                               f"within {timeout} s (synced: {seen})")
        time.sleep(0.02)
