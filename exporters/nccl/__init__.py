"""NCCL's RAS service: its answers parsed (``ras``), the protocol client (``rasclient``) and what ties an
answer to this node (``node``)."""
