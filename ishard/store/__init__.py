"""Where bytes live: one storage contract (``base.Store``) and its implementations."""
