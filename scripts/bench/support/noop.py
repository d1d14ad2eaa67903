# A Python worker that does nothing: measures launcher and interpreter start-up only.
