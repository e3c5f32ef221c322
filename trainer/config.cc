// Placeholder: written by the helper implementing hy/trainer/config.h.
