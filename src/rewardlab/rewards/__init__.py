"""Reward families, one file each. Every module here registers its rewards with `rewardlab.registry.register`
when imported; the registry finds the modules by scanning this package."""
