"""Sharded index builds: the input cut into shards built apart, kept as they finish, resumed."""
