"""The call queue: callers beyond the node's conversation capacity wait in line."""
