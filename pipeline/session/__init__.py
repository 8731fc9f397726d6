"""Where a command's work runs: the Ray session it joins or starts (local, or a cluster's address)."""
