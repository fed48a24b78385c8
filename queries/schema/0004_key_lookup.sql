-- /mcp authenticates a key before it knows the box: find a key by its hash alone.
CREATE INDEX api_keys_by_hash ON api_keys (key_hash);
