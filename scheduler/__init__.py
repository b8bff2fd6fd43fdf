"""The portal's own scheduler: places the pods that name it (docs/own-scheduler.md)."""
