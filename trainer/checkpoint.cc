// Placeholder: written by the helper implementing hy/trainer/checkpoint.h.
